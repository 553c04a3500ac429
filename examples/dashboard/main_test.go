package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestAccess runs the application and checks who may do what under
// /admin/queues/: nobody without a login, the viewer reads but cannot
// pause, the operator pauses.
func TestAccess(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dashboard.db")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]user{
		"viewer":   {password: "look"},
		"operator": {password: "act", operator: true},
		"nobody":   {}, // no password: cannot log in
	}
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- run(ctx, "sqlite://"+file, ln, users) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	base := "http://" + ln.Addr().String() + "/admin/queues/"

	// do sends a request as name (no credentials when name is ""),
	// with the CSRF token the pages set, and returns the status and body.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, name, password string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if name != "" {
			req.SetBasicAuth(name, password)
		}
		for _, c := range jar.Cookies(req.URL) {
			if c.Name == "meridian_csrf" {
				req.Header.Set("X-CSRF-Token", c.Value)
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	for _, tc := range []struct{ name, password string }{{"", ""}, {"viewer", "wrong"}, {"nobody", ""}, {"stranger", "look"}} {
		if code, _ := do("GET", "", tc.name, tc.password); code != http.StatusUnauthorized {
			t.Errorf("GET as %q/%q: status %d, want 401", tc.name, tc.password, code)
		}
	}
	code, body := do("GET", "queue/default", "viewer", "look")
	if code != http.StatusOK || !strings.Contains(body, "Meridian") || strings.Contains(body, "csrf_token") {
		t.Fatalf("GET as viewer: status %d, want 200 and the queue's page without action forms", code)
	}
	if code, _ := do("POST", "queue/default/pause", "viewer", "look"); code != http.StatusForbidden {
		t.Errorf("pause as viewer: status %d, want 403", code)
	}
	if code, body := do("GET", "queue/default", "operator", "act"); code != http.StatusOK || !strings.Contains(body, "csrf_token") {
		t.Fatalf("GET as operator: status %d, want 200 and the queue's page with its pause form", code)
	}
	if code, body := do("POST", "queue/default/pause", "operator", "act"); code != http.StatusSeeOther {
		t.Fatalf("pause as operator: status %d, want 303:\n%s", code, body[strings.Index(body, "<main"):])
	}

	q, err := queue.Open(t.Context(), "sqlite://"+file)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	paused, err := q.(driver.Controller).Paused(t.Context())
	if err != nil || !slices.Equal(paused, []string{"default"}) {
		t.Fatalf("paused queues = %v, %v; want [default] after the operator's pause", paused, err)
	}
}
