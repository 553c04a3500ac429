package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
)

// TestMetricsNextToDashboard runs the example on memory and scrapes
// /metrics until the nine jobs are done: nine successes and three retries.
func TestMetricsNextToDashboard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, "memory://", "127.0.0.1:0", 9, 10*time.Millisecond, func(a string) { addrc <- a })
	}()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	want := []string{
		`meridian_jobs_processed_total{job="Resize",queue="default"} 9`,
		`meridian_jobs_retried_total{job="Resize",queue="default"} 3`,
		`meridian_queue_jobs{queue="default",state="ready"} 0`,
	}
	var body, missing string
	if !testutil.WaitFor(30*time.Second, func() bool {
		_, body = get("/metrics")
		missing = ""
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				missing = w
			}
		}
		return missing == ""
	}) {
		t.Fatalf("/metrics lacks %q:\n%s", missing, body)
	}
	if code, _ := get("/admin/queues/"); code != http.StatusOK {
		t.Errorf("the dashboard answered %d", code)
	}
}
