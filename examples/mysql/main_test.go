package main

import (
	"bytes"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

// TestRun runs the program against MERIDIAN_MYSQL_DSN on tables of its own
// and checks what it prints.
func TestRun(t *testing.T) {
	dsn := testutil.DSN(t, testutil.MySQLEnv)
	var out bytes.Buffer
	if err := run(t.Context(), dsn, testutil.Name("mysqlexample_"), true, &out); err != nil {
		t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
	}
	want := "dispatch order.paid to https://hooks.example.com/shop: duplicate false\n" +
		"dispatch order.paid to https://hooks.example.com/shop: duplicate true\n" +
		"dispatch order.paid to https://hooks.example.com/disabled: duplicate false\n" +
		"delivered order.paid to https://hooks.example.com/shop\n" +
		"dead letter after 1 attempt: endpoint disabled by its owner\n" +
		"delivered order.paid to https://hooks.example.com/disabled\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
