package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestWorkersPageFleetActions: the Workers page pauses, continues and
// terminates every worker or one through the store (driver.Fleet), with
// CSRF-protected forms, and the JSON API does the same.
func TestWorkersPageFleetActions(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ctx := context.Background()
	for _, id := range []string{"w1", "w2"} {
		if err := q.Heartbeat(ctx, driver.WorkerInfo{ID: id, Host: "host-" + id, PID: 1, Queues: []string{queue.DefaultQueue}, Concurrency: 2}); err != nil {
			t.Fatal(err)
		}
	}
	s := serve(t, dashboard.ForQueue(q))
	orders := func(id string) driver.WorkerOrders {
		t.Helper()
		o, err := q.WorkerOrders(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}

	r := s.page("workers")
	f := formWithAction(r.Doc, "workers/pause")
	if f == nil {
		t.Fatalf("no Pause all form on the workers page:\n%s", r.Body)
	}
	r = s.follow(s.submit(r.Request.URL.String(), f, nil, nil))
	if !orders("w1").Paused || !orders("w2").Paused {
		t.Fatal("Pause all did not pause the fleet")
	}
	if !strings.Contains(r.Body, "Paused: the workers take no new jobs") || formWithAction(r.Doc, "workers/continue") == nil {
		t.Fatalf("after Pause all the page shows no flash or no Continue all:\n%s", r.Body)
	}
	r = s.follow(s.submit(r.Request.URL.String(), formWithAction(r.Doc, "workers/continue"), nil, nil))
	if orders("w1").Paused {
		t.Fatal("Continue all did not continue the fleet")
	}

	f = formWithAction(r.Doc, "workers/w2/pause")
	if f == nil {
		t.Fatalf("no Pause form for w2:\n%s", r.Body)
	}
	r = s.follow(s.submit(r.Request.URL.String(), f, nil, nil))
	if orders("w1").Paused || !orders("w2").Paused {
		t.Fatalf("pausing w2: w1 %+v, w2 %+v", orders("w1"), orders("w2"))
	}
	r = s.follow(s.submit(r.Request.URL.String(), formWithAction(r.Doc, "workers/w1/terminate"), nil, nil))
	if !orders("w1").Terminate || orders("w2").Terminate {
		t.Fatalf("terminating w1: w1 %+v, w2 %+v", orders("w1"), orders("w2"))
	}
	s.follow(s.submit(r.Request.URL.String(), formWithAction(r.Doc, "workers/terminate"), nil, nil))
	if orders("w2").Terminations != 1 {
		t.Fatalf("Terminate all: %+v, want Terminations 1", orders("w2"))
	}

	// A form posted without its token is refused.
	bad := s.submit(s.url("workers"), formWithAction(s.page("workers").Doc, "workers/pause"), nil, map[string][]string{"csrf_token": {"x"}})
	if bad.StatusCode != http.StatusForbidden || orders("w1").Paused {
		t.Fatalf("a pause with a wrong token: %d, fleet paused %v; want 403 and no pause", bad.StatusCode, orders("w1").Paused)
	}

	post := func(path string) response {
		req, _ := http.NewRequest(http.MethodPost, s.url(path), nil)
		req.Header.Set("Origin", s.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for _, c := range s.c.Jar.Cookies(req.URL) {
			if c.Name == "meridian_csrf" {
				req.Header.Set("X-Csrf-Token", c.Value)
			}
		}
		return s.do(req)
	}
	if r := post("api/workers/pause"); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `"command": "pause"`) {
		t.Fatalf("api pause: %d %s", r.StatusCode, r.Body)
	}
	if r := post("api/workers/w1/reboot"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("api reboot: %d %s, want 400", r.StatusCode, r.Body)
	}
	var list struct {
		FleetPaused *bool `json:"fleet_paused"`
		Workers     []struct {
			ID     string `json:"id"`
			Paused bool   `json:"paused"`
		} `json:"workers"`
	}
	r = s.get(s.url("api/workers"))
	if err := json.Unmarshal([]byte(r.Body), &list); err != nil || list.FleetPaused == nil || !*list.FleetPaused ||
		!slices.ContainsFunc(list.Workers, func(w struct {
			ID     string `json:"id"`
			Paused bool   `json:"paused"`
		}) bool {
			return w.Paused
		}) {
		t.Fatalf("api/workers after an API pause = %s, %v", r.Body, err)
	}
}
