package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

// TestRateLimit runs the example in memory and on a SQLite file; run fails
// if an account made more calls a second than its limit, or two at once.
func TestRateLimit(t *testing.T) {
	for _, url := range []string{"memory://", "sqlite://" + filepath.Join(t.TempDir(), "ratelimit.db")} {
		if err := run(context.Background(), url, io.Discard); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
	}
}
