package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestRun runs the program against MERIDIAN_REDIS_ADDR under a prefix of
// its own and checks what it prints: the second signup of user 1 stored
// nothing, and the worker, polling once an hour, worked every job at once.
func TestRun(t *testing.T) {
	addr := testutil.DSN(t, testutil.RedisEnv)
	url := addr
	if !strings.Contains(addr, "://") {
		url = "redis://" + addr + "/0"
	}
	var out bytes.Buffer
	if err := run(t.Context(), url, testutil.Name("redisexample_"), &out); err != nil {
		t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
	}
	want := "jobs waiting: 3\n" +
		"welcome email to ada@example.com\n" +
		"welcome email to grace@example.com\n" +
		"welcome email to alan@example.com\n" +
		"jobs waiting after the worker: 0\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
