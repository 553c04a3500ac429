package dashboard_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// TestSearchSaysWhetherIndexed: a jobs page that searches says whether
// the store's payload search index is on, on SQLite before and after
// `meridian search enable` (EnableSearchIndex); a page that does not
// search, and a store that keeps no index (memqueue), say nothing of it.
func TestSearchSaysWhetherIndexed(t *testing.T) {
	t.Parallel()
	type indexer interface {
		EnableSearchIndex(ctx context.Context) error
	}
	index := func(t *testing.T, s *site, rel string) string {
		t.Helper()
		n := find(s.page(rel).Doc, byID("search-index"))
		if n == nil {
			return ""
		}
		return attr(n, "data-index")
	}
	q := openSQLite(t)
	if err := queue.Dispatch(t.Context(), q, struct{ To string }{"a@example.com"}); err != nil {
		t.Fatal(err)
	}
	// Each ForQueue keeps its own answer for a minute: a new one reads
	// the store again.
	before := serve(t, dashboard.ForQueue(q))
	if got := index(t, before, "jobs?state=ready&q=example"); got != "off" {
		t.Errorf("SQLite without the index: search-index %q, want off", got)
	}
	if got := index(t, before, "jobs?state=ready"); got != "" {
		t.Errorf("a page without a search: search-index %q, want none", got)
	}
	if err := q.(indexer).EnableSearchIndex(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := serve(t, dashboard.ForQueue(q))
	if got := index(t, after, "jobs?state=ready&q=example"); got != "on" {
		t.Errorf("SQLite with the index: search-index %q, want on", got)
	}
	if got := index(t, after, "failed?q=example"); got != "on" {
		t.Errorf("the failed list with the index: search-index %q, want on", got)
	}
	var page struct {
		SearchIndex string `json:"search_index"`
	}
	if r := after.page("api/jobs?state=ready&q=example"); json.Unmarshal([]byte(r.Body), &page) != nil || page.SearchIndex != "on" {
		t.Errorf("api/jobs with the index: search_index %q in %s, want on", page.SearchIndex, r.Body)
	}
	mem := serve(t, dashboard.ForQueue(memqueue.New()))
	if got := index(t, mem, "jobs?state=ready&q=example"); got != "" {
		t.Errorf("memqueue: search-index %q, want none", got)
	}
	page.SearchIndex = ""
	if r := mem.page("api/jobs?state=ready&q=example"); json.Unmarshal([]byte(r.Body), &page) != nil || page.SearchIndex != "" {
		t.Errorf("api/jobs on memqueue: search_index %q in %s, want none", page.SearchIndex, r.Body)
	}
}
