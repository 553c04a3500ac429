package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
)

// TestDemo runs the README's demo on a SQLite file for a moment: jobs flow
// and the dashboard answers under /admin/queues/.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	url := "sqlite://" + filepath.Join(t.TempDir(), "demo.db")
	go func() { errc <- run(ctx, url, 10*time.Millisecond, "127.0.0.1:0", func(a string) { addrc <- a }) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("demo stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the dashboard did not start")
	}
	var body []byte
	if !testutil.WaitFor(30*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/admin/queues/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("dashboard answered %s", resp.Status)
		}
		// Both of the demo's queues show up once jobs have flowed.
		return strings.Contains(string(body), "emails") && strings.Contains(string(body), "images")
	}) {
		t.Fatalf("the demo's queues never appeared on the dashboard:\n%s", body)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("demo: %v", err)
	}
}
