package dashboard_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// slowSearchQueue fails every payload search, as a search stopped by its
// statement timeout does.
type slowSearchQueue struct{ *memqueue.Queue }

func (s slowSearchQueue) ListJobs(ctx context.Context, f driver.JobFilter) (driver.JobPage, error) {
	if f.Search != "" {
		return driver.JobPage{}, errors.New("pq: canceling statement due to statement timeout")
	}
	return s.Queue.ListJobs(ctx, f)
}

// A search that does not finish says so and how to narrow it; the other
// pages keep working.
func TestSearchThatTimesOutSaysWhy(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	deadJobs(t, q, "emails", 2, `{"a":1}`, "x")
	s := serve(t, dashboard.ForQueue(slowSearchQueue{q}), dashboard.Logger(slog.New(slog.DiscardHandler)))
	r := s.get(s.url("failed?q=needle"))
	if r.StatusCode != 503 || !strings.Contains(text(find(r.Doc, byID("message"))), "Narrow it with a queue, name or tag filter") {
		t.Errorf("a failed search: %d %q", r.StatusCode, text(find(r.Doc, byID("message"))))
	}
	if got := rowIDs(s.page("failed").Doc); len(got) != 2 {
		t.Errorf("the list without search: %d rows", len(got))
	}
	// A search that runs shows what bounds it.
	plain := serve(t, dashboard.ForQueue(q))
	if hint := find(plain.page("jobs?state=ready&q=x").Doc, func(n *html.Node) bool { return strings.Contains(attr(n, "class"), "search-hint") }); hint == nil {
		t.Error("a search page does not say the search is bounded")
	}
}

// A job page for a job that is no longer stored explains why.
func TestGoneJobExplained(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.ForQueue(memqueue.New()))
	r := s.get(s.url("jobs/0123"))
	if msg := text(find(r.Doc, byID("message"))); r.StatusCode != 404 || !strings.Contains(msg, "There is no job 0123") || !strings.Contains(msg, "finished") {
		t.Errorf("a gone job: %d %q", r.StatusCode, msg)
	}
}

// A job page links back to the list that holds the job.
func TestJobPageLinksBackToItsList(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	dead := deadJobs(t, q, "emails", 1, `{}`, "x")
	ready, _ := queue.NewJob(struct{}{}, queue.OnQueue("audio"))
	if err := q.Push(context.Background(), ready); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q))
	for _, id := range []string{dead[0], ready.ID} {
		u := s.url("jobs/" + id)
		back := find(s.page("jobs/"+id).Doc, byID("back-to-list"))
		if back == nil {
			t.Fatalf("job %s: no link back to its list", id)
		}
		list := resolve(t, u, attr(back, "href"))
		if !strings.HasPrefix(list, s.url("")) {
			t.Fatalf("the link back leaves the mount point: %s", list)
		}
		if got := rowIDs(s.page(strings.TrimPrefix(list, s.url(""))).Doc); len(got) != 1 || got[0] != id {
			t.Errorf("job %s links back to %s, which lists %v", id, list, got)
		}
	}
}

// In cookbook mode the failed list is not split by queue, and the queue
// page does not pretend it is.
func TestCookbookQueuePageFailedLink(t *testing.T) {
	t.Parallel()
	s, stats, failed, _ := cookbookSite(t)
	stats.OnFailed("emails")
	failed.Record(queue.Job{ID: "a"}, "emails", errors.New("x"))
	failed.Record(queue.Job{ID: "b"}, "audio", errors.New("y"))
	r := s.page("queue/emails")
	link := find(r.Doc, func(n *html.Node) bool { return n.Data == "a" && strings.Contains(text(n), "Failed jobs") })
	if link == nil || !strings.HasSuffix(attr(link, "href"), "failed") || !strings.Contains(text(link), "every queue") {
		t.Fatalf("cookbook queue page's failed link: %v", link)
	}
	if got := rowIDs(s.page("failed?queue=emails").Doc); len(got) != 2 {
		t.Errorf("cookbook failed list: %v", got)
	}
}

// The lists' Clear link drops every filter and keeps the state; the pages
// call dead jobs failed, and so may a URL.
func TestClearAndFailedAlias(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	deadJobs(t, q, "emails", 2, `{}`, "x")
	s := serve(t, dashboard.ForQueue(q))
	for p, want := range map[string]string{"failed?queue=emails&q=x": "failed", "jobs?state=scheduled&name=N": "jobs?state=scheduled"} {
		if got := attr(find(s.page(p).Doc, byID("clear-filters")), "href"); !strings.HasSuffix(got, want) || strings.Contains(got, "queue=") {
			t.Errorf("%s: Clear links to %q, want .../%s", p, got, want)
		}
	}
	if got := rowIDs(s.page("jobs?state=failed").Doc); len(got) != 2 {
		t.Errorf("jobs?state=failed lists %d jobs, want the 2 failed", len(got))
	}
}

// A job's name and tags in a list link to the list narrowed to them,
// keeping the other filters.
func TestNameAndTagLinksFilter(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ctx := context.Background()
	for _, j := range []queue.Job{
		{Queue: "a", Name: "Mail", Tags: []string{"vip"}},
		{Queue: "a", Name: "Mail"},
		{Queue: "a", Name: "Resize", Tags: []string{"vip"}},
		{Queue: "b", Name: "Mail", Tags: []string{"vip"}},
	} {
		if err := q.Push(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	s := serve(t, dashboard.ForQueue(q))
	u := s.url("jobs?state=ready&queue=a")
	r := s.get(u)
	follow := func(class, label string) []string {
		t.Helper()
		l := find(r.Doc, func(n *html.Node) bool { return n.Data == "a" && attr(n, "class") == class && text(n) == label })
		if l == nil {
			t.Fatalf("no %s link %q", class, label)
		}
		return rowIDs(s.page(strings.TrimPrefix(resolve(t, u, attr(l, "href")), s.url(""))).Doc)
	}
	if got := follow("name-filter", "Mail"); len(got) != 2 {
		t.Errorf("Mail jobs of queue a: %d rows, want 2", len(got))
	}
	if got := follow("tag", "vip"); len(got) != 2 {
		t.Errorf("vip jobs of queue a: %d rows, want 2", len(got))
	}
}
