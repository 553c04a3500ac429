package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

// TestRun runs the program against MERIDIAN_POSTGRES_DSN on tables of its
// own and checks what it prints.
func TestRun(t *testing.T) {
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	var b [4]byte
	_, _ = rand.Read(b[:])
	var out bytes.Buffer
	if err := run(t.Context(), dsn, "txenqueue_"+hex.EncodeToString(b[:]), true, &out); err != nil {
		t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
	}
	want := "jobs after a rolled-back sign-up: 0\n" +
		"welcome mail for ann@example.com (woken by NOTIFY: true)\n" +
		"jobs after the worker: 0\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
