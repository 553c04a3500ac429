package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

// TestCSVImport runs the import on a SQLite file and in memory; run fails
// unless each file's batch ran the callbacks its rows call for, once each.
func TestCSVImport(t *testing.T) {
	for _, url := range []string{"memory://", "sqlite://" + filepath.Join(t.TempDir(), "csvimport.db")} {
		if err := run(context.Background(), url, io.Discard); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
	}
}
