package main

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestRun runs the program on a file of its own, twice: the second run's
// producer finds its jobs' unique keys free again (the first run's jobs
// are done) and the worker works the new ones from the same file.
func TestRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "thumbnails.db")
	want := "jobs waiting in " + path + ": 3\n" +
		"thumbnail of cat.png at 128px\n" +
		"thumbnail of dog.png at 128px\n" +
		"thumbnail of owl.png at 128px\n" +
		"jobs waiting after the worker: 0\n"
	for range 2 {
		var out bytes.Buffer
		if err := run(t.Context(), path, &out); err != nil {
			t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
		}
		if out.String() != want {
			t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
		}
	}
}
