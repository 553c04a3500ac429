package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

// TestChain runs the pipeline on a SQLite file and in memory; run fails if
// a step ran out of order or the catch job did not run.
func TestChain(t *testing.T) {
	for _, url := range []string{"memory://", "sqlite://" + filepath.Join(t.TempDir(), "chain.db")} {
		if err := run(context.Background(), url, io.Discard); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
	}
}
