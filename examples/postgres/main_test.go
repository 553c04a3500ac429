package main

import (
	"bytes"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

// TestRun runs the program against MERIDIAN_POSTGRES_DSN on tables of its
// own and checks what it prints.
func TestRun(t *testing.T) {
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	var out bytes.Buffer
	if err := run(t.Context(), dsn, testutil.Name("pgexample_"), true, &out); err != nil {
		t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
	}
	want := "loaded 10000 jobs\n" +
		"worked 10000 jobs\n" +
		"single dispatches woken by NOTIFY, well inside the 30 s poll: true\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
