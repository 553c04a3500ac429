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
)

// slowSearchQueue fails every payload search, as a search stopped by its
// statement timeout does.
type slowSearchQueue struct{ *memqueue.Queue }

func (s slowSearchQueue) ListJobs(ctx context.Context, f queue.JobFilter) (queue.JobPage, error) {
	if f.Search != "" {
		return queue.JobPage{}, errors.New("pq: canceling statement due to statement timeout")
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
