package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type cancelMe struct{ N int }

func flashOf(doc *html.Node) string {
	return text(find(doc, func(n *html.Node) bool { return n.Data == "p" && strings.Contains(attr(n, "class"), "flash") }))
}

func TestCancelFromTheDashboard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	var ids []string
	for i := range 4 {
		id, _, err := queue.Enqueue(ctx, q, cancelMe{i}, queue.OnQueue("emails"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	later, _, err := queue.Enqueue(ctx, q, cancelMe{9}, queue.OnQueue("emails"), queue.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q))
	state := func(id string) driver.JobState {
		info, err := q.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return info.State
	}

	// One job, from its own page: back on the page, now cancelled.
	p := s.page("jobs/" + ids[0])
	f := find(p.Doc, func(n *html.Node) bool { return n.Data == "form" && find(n, byID("cancel")) != nil })
	if f == nil {
		t.Fatalf("a ready job's page has no cancel form:\n%s", p.Body)
	}
	after := s.follow(s.submit(s.url("jobs/"+ids[0]), f, nil, nil))
	if st := state(ids[0]); st != queue.StateCancelled {
		t.Fatalf("after the cancel button the job is %s", st)
	}
	if !strings.Contains(flashOf(after.Doc), "Cancelled 1 job") || find(after.Doc, byID("cancel")) != nil {
		t.Errorf("after cancel the job page says %q and still offers cancel: %v", flashOf(after.Doc), find(after.Doc, byID("cancel")) != nil)
	}
	// The same form again: the job has finished, nothing happens, and the
	// page says why.
	again := s.follow(s.submit(s.url("jobs/"+ids[0]), f, nil, nil))
	if !strings.Contains(flashOf(again.Doc), "already finished") {
		t.Errorf("a second cancel says %q", flashOf(again.Doc))
	}

	// Bulk, selected: two of the ready list.
	list := s.page("jobs?state=ready")
	bulk := formWithAction(list.Doc, "jobs/bulk")
	sel := find(bulk, byID("cancel-selected"))
	if bulk == nil || sel == nil {
		t.Fatalf("the ready list has no bulk cancel form:\n%s", list.Body)
	}
	res := s.follow(s.submit(s.url("jobs?state=ready"), bulk, sel, url.Values{"id": {ids[1], ids[2]}}))
	if state(ids[1]) != queue.StateCancelled || state(ids[2]) != queue.StateCancelled || state(ids[3]) != queue.StateReady {
		t.Errorf("after cancelling two selected: %s %s %s", state(ids[1]), state(ids[2]), state(ids[3]))
	}
	if !strings.Contains(flashOf(res.Doc), "Cancelled 2 job") {
		t.Errorf("bulk cancel flash = %q", flashOf(res.Doc))
	}

	// Bulk, matching: every scheduled job of the queue; the ready one stays.
	s.follow(s.confirmMatching("jobs?state=scheduled&queue=emails", "cancel-matching", "1 scheduled job(s) match"))
	if state(later) != queue.StateCancelled || state(ids[3]) != queue.StateReady {
		t.Errorf("cancel-matching on scheduled: scheduled job %s, ready job %s", state(later), state(ids[3]))
	}

	// The cancelled tab lists them, without cancel buttons.
	c := s.page("jobs?state=cancelled")
	got := rowIDs(c.Doc)
	slices.Sort(got)
	want := []string{ids[0], ids[1], ids[2], later}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("cancelled tab lists %v, want %v", got, want)
	}
	if formWithAction(c.Doc, "jobs/bulk") != nil || formWithAction(c.Doc, "/cancel") != nil {
		t.Error("the cancelled list offers to cancel again")
	}
	// Failed and done lists offer no cancel either, and a bulk post for a
	// finished state is refused.
	if r := s.page("jobs?state=done"); formWithAction(r.Doc, "jobs/bulk") != nil {
		t.Error("the done list offers bulk cancel")
	}
	bad := s.submit(s.url("jobs?state=ready"), bulk, nil, url.Values{"state": {"done"}, "do": {"cancel-matching"}})
	if bad.StatusCode != 400 {
		t.Errorf("a bulk cancel of done jobs answered %d, want 400", bad.StatusCode)
	}
}

func TestReadOnlyDashboardOffersNoCancel(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	id, _, err := queue.Enqueue(context.Background(), q, cancelMe{1})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q), dashboard.Authorize(func(*http.Request) (bool, bool) { return true, false }))
	if p := s.page("jobs/" + id); find(p.Doc, byID("cancel")) != nil {
		t.Error("a read-only job page offers cancel")
	}
	if p := s.page("jobs?state=ready"); formWithAction(p.Doc, "jobs/bulk") != nil {
		t.Error("a read-only list offers bulk cancel")
	}
}

func TestPeriodicPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	s := serve(t, dashboard.ForQueue(q))
	if p := s.page("periodic"); find(p.Doc, byID("no-periodic")) == nil {
		t.Errorf("an empty periodic page does not say so:\n%s", p.Body)
	}
	tick := time.Now().Add(-time.Minute).Truncate(time.Second)
	for _, name := range []string{"nightly", "hourly"} {
		if _, err := q.RegisterPeriodic(ctx, driver.PeriodicInfo{Name: name, Schedule: "every 1h", NextTick: tick}); err != nil {
			t.Fatal(err)
		}
	}
	j, err := queue.NewJob(cancelMe{7})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := q.ClaimTick(ctx, driver.PeriodicInfo{Name: "nightly", Schedule: "every 1h", LastTick: tick, NextTick: tick.Add(time.Hour), LastJobID: j.ID}, j); !ok || err != nil {
		t.Fatalf("ClaimTick = %v, %v", ok, err)
	}
	p := s.page("periodic")
	var rows []string
	for _, tr := range findAll(find(p.Doc, byID("periodic")), func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-periodic") != "" }) {
		rows = append(rows, attr(tr, "data-periodic")+": "+text(tr))
	}
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "hourly") || !strings.Contains(rows[0], "none yet") ||
		!strings.HasPrefix(rows[1], "nightly") || !strings.Contains(strings.ToLower(rows[1]), "ready") {
		t.Errorf("periodic rows = %q", rows)
	}
	if find(p.Doc, func(n *html.Node) bool { return n.Data == "a" && strings.HasSuffix(attr(n, "href"), "jobs/"+j.ID) }) == nil {
		t.Error("the last run does not link to its job")
	}
	var api struct {
		Periodic []struct {
			Name      string    `json:"name"`
			Schedule  string    `json:"schedule"`
			LastTick  time.Time `json:"last_tick"`
			LastJobID string    `json:"last_job_id"`
		} `json:"periodic"`
	}
	if err := json.Unmarshal([]byte(s.page("api/periodic").Body), &api); err != nil {
		t.Fatal(err)
	}
	if len(api.Periodic) != 2 || api.Periodic[1].Name != "nightly" || api.Periodic[1].LastJobID != j.ID || !api.Periodic[1].LastTick.Equal(tick) {
		t.Errorf("api/periodic = %+v", api)
	}
	// A driver without periodic jobs has no page and no link to it.
	other := serve(t, dashboard.InspectorSource(dashboard.ForQueue(q)))
	if r := other.get(other.url("periodic")); r.StatusCode != 404 {
		t.Errorf("periodic page without the ability: %d, want 404", r.StatusCode)
	}
}
