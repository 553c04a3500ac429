package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/queue"
)

// A payload search over 100,000 ready jobs on SQLite finds the one match
// at position 60,000, six times deeper than the store examines in one
// call (10,000 rows), on the first page: the handler goes on by itself
// (SearchBudget). Without the budget the same request stops at the
// store's bound and says how many it examined instead. A search with no
// match examines every job and says so, with no page after it.
func TestSearchFindsADeepMatch(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fills 100,000 jobs")
	}
	ctx := context.Background()
	q, err := queue.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.(io.Closer).Close() })
	const total, deep = 100_000, 60_000
	base := time.Now().Add(-time.Hour)
	jobs := make([]queue.Job, 0, 1000)
	needle := ""
	for i := range total {
		j := queue.Job{ID: fmt.Sprintf("job-%06d", i), Queue: "bulk", Name: "Import",
			Payload: fmt.Appendf(nil, `{"row":%d}`, i), AvailableAt: base.Add(time.Duration(i) * time.Microsecond)}
		if i == deep {
			j.Payload, needle = []byte(`{"row":60000,"ref":"needle-7f3a"}`), j.ID
		}
		jobs = append(jobs, j)
		if len(jobs) == cap(jobs) || i == total-1 {
			if n, err := queue.PushMany(ctx, q, jobs); err != nil || n != len(jobs) {
				t.Fatalf("PushMany = %d, %v", n, err)
			}
			jobs = jobs[:0]
		}
	}
	search := func(s *site, term string) (found []string, next string, scanned int) {
		t.Helper()
		code, m := s.apiCall(http.MethodGet, "jobs?"+url.Values{"state": {"ready"}, "queue": {"bulk"}, "q": {term}}.Encode(), "", nil)
		if code != 200 {
			t.Fatalf("api/jobs?q=%s: %d %v", term, code, m)
		}
		list, _ := m["jobs"].([]any)
		for _, j := range list {
			found = append(found, j.(map[string]any)["id"].(string))
		}
		next, _ = m["next"].(string)
		n, _ := m["scanned"].(float64)
		return found, next, int(n)
	}

	bounded := serve(t, dashboard.ForQueue(q), dashboard.SearchBudget(0))
	if found, next, scanned := search(bounded, "needle-7f3a"); len(found) != 0 || next == "" || scanned == 0 || scanned >= deep {
		t.Fatalf("one bounded call: found %v, next %q, scanned %d; want no match among fewer than %d examined, with a next page", found, next, scanned, deep)
	}

	s := serve(t, dashboard.ForQueue(q), dashboard.SearchBudget(time.Minute), dashboard.RequestTimeout(2*time.Minute))
	if found, _, _ := search(s, "needle-7f3a"); len(found) != 1 || found[0] != needle {
		t.Fatalf("the first page of the search = %v, want [%s] (position %d of %d)", found, needle, deep, total)
	}
	if found, next, scanned := search(s, "no-such-thing"); len(found) != 0 || next != "" || scanned != 0 {
		t.Errorf("a search without a match: found %v, next %q, scanned %d; want every job examined and no page after", found, next, scanned)
	}
}
