package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestPeriodicControls pauses, resumes and runs a periodic job from the
// Periodic page and from the API, and checks the overdue hint.
func TestPeriodicControls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	tpl, err := queue.NewJob(cancelMe{42}, queue.OnQueue("reports"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := driver.EncodePeriodicTemplate(tpl)
	if err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(time.Hour)
	if _, err := q.RegisterPeriodic(ctx, driver.PeriodicInfo{Name: "nightly", Schedule: "every 24h", NextTick: soon, Template: enc}); err != nil {
		t.Fatal(err)
	}
	// "stale" was registered long ago by a worker that no longer runs it,
	// and by an older release: no template, so no "Run now".
	if _, err := q.RegisterPeriodic(ctx, driver.PeriodicInfo{Name: "stale", Schedule: "every 1h", NextTick: time.Now().Add(-3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q))
	row := func(doc *html.Node, name string) *html.Node {
		return find(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-periodic") == name })
	}
	button := func(doc *html.Node, name, data string) *html.Node {
		return find(row(doc, name), func(n *html.Node) bool {
			return n.Data == "form" && find(n, func(b *html.Node) bool { return hasAttr(b, data) }) != nil
		})
	}
	p := s.page("periodic")
	// The "stale" row is not overdue by its own next tick alone: memqueue
	// saw it registered now. Its hint is checked through the API below.
	if button(p.Doc, "stale", "data-run") != nil || !strings.Contains(text(row(p.Doc, "stale")), "no job kept yet") {
		t.Errorf("a record without a template offers Run now:\n%s", text(row(p.Doc, "stale")))
	}
	f := button(p.Doc, "nightly", "data-pause")
	if f == nil {
		t.Fatalf("no Pause button on nightly:\n%s", p.Body)
	}
	after := s.follow(s.submit(s.url("periodic"), f, nil, nil))
	if !strings.Contains(flashOf(after.Doc), "paused") || find(row(after.Doc, "nightly"), func(n *html.Node) bool { return hasAttr(n, "data-paused") }) == nil {
		t.Fatalf("after Pause the page says %q and shows nightly as %q", flashOf(after.Doc), text(row(after.Doc, "nightly")))
	}
	if recs, _ := q.Periodics(ctx); !recs[0].Paused {
		t.Fatal("the Pause button did not pause the record")
	}
	// Run now works while paused, and pushes the template's job.
	after = s.follow(s.submit(s.url("periodic"), button(after.Doc, "nightly", "data-run"), nil, nil))
	if !strings.Contains(flashOf(after.Doc), "run now") {
		t.Errorf("after Run now the page says %q", flashOf(after.Doc))
	}
	if n, err := q.Len(ctx, "reports"); err != nil || n != 1 {
		t.Fatalf("after Run now queue reports holds %d jobs (%v), want 1", n, err)
	}
	after = s.follow(s.submit(s.url("periodic"), button(after.Doc, "nightly", "data-resume"), nil, nil))
	if recs, _ := q.Periodics(ctx); recs[0].Paused || !strings.Contains(flashOf(after.Doc), "resumed") {
		t.Fatalf("Resume left the record paused (%v) or said %q", recs[0].Paused, flashOf(after.Doc))
	}

	// The API: the same actions, each answering the record.
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
	var out struct {
		Periodic struct {
			Name     string `json:"name"`
			Paused   bool   `json:"paused"`
			Runnable bool   `json:"runnable"`
		} `json:"periodic"`
		JobID string `json:"job_id"`
	}
	r := post("api/periodic/nightly/pause")
	if err := json.Unmarshal([]byte(r.Body), &out); err != nil || r.StatusCode != 200 || !out.Periodic.Paused || !out.Periodic.Runnable {
		t.Fatalf("api pause = %d %s (%v)", r.StatusCode, r.Body, err)
	}
	r = post("api/periodic/nightly/run")
	if err := json.Unmarshal([]byte(r.Body), &out); err != nil || r.StatusCode != 200 || out.JobID == "" {
		t.Fatalf("api run = %d %s (%v)", r.StatusCode, r.Body, err)
	}
	if info, err := q.GetJob(ctx, out.JobID); err != nil || info.Meta[queue.MetaPeriodic] != "nightly" || info.QueueName() != "reports" {
		t.Errorf("the API's run pushed %+v (%v), want a job of queue reports marked nightly", info, err)
	}
	r = post("api/periodic/nightly/resume")
	if err := json.Unmarshal([]byte(r.Body), &out); err != nil || r.StatusCode != 200 || out.Periodic.Paused {
		t.Fatalf("api resume = %d %s (%v)", r.StatusCode, r.Body, err)
	}
	for path, want := range map[string]int{"api/periodic/nope/pause": 404, "api/periodic/stale/run": 404, "api/periodic/nightly/explode": 404} {
		if r := post(path); r.StatusCode != want {
			t.Errorf("POST %s = %d, want %d", path, r.StatusCode, want)
		}
	}

	// Read-only: no buttons, and the actions are refused.
	ro := serve(t, dashboard.ForQueue(q), dashboard.Authorize(func(*http.Request) (bool, bool) { return true, false }))
	if p := ro.page("periodic"); button(p.Doc, "nightly", "data-pause") != nil || button(p.Doc, "nightly", "data-run") != nil {
		t.Error("a read-only dashboard offers periodic controls")
	}
}
