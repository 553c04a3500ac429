package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestFeatures runs the walk-through on a SQLite file; run fails if a
// feature did not do what it says.
func TestFeatures(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "features.db")
	if err := run(context.Background(), url, os.Stdout); err != nil {
		t.Fatal(err)
	}
}
