package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"  // mysql://
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite" // sqlite://
)

// openSQLite opens a SQLite queue on a file of the test's own.
func openSQLite(t *testing.T) queue.Queue {
	t.Helper()
	q, err := queue.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, ok := q.(io.Closer); ok {
			c.Close()
		}
	})
	return q
}

// openMySQL opens the MariaDB/MySQL queue of MERIDIAN_MYSQL_DSN (a
// go-sql-driver DSN) on tables of the test's own; it skips (fails under
// CI=true) when the variable is unset.
func openMySQL(t *testing.T) queue.Queue {
	t.Helper()
	q, err := queue.Open(context.Background(), testutil.QueueURL(t, testutil.MySQLEnv, testutil.Name("dash_pages_")))
	if err != nil {
		t.Fatalf("opening MySQL (is it running?): %v", err)
	}
	t.Cleanup(func() {
		if d, ok := q.(interface{ DropTables(context.Context) error }); ok {
			if err := d.DropTables(context.Background()); err != nil {
				t.Errorf("dropping the test tables: %v", err)
			}
		}
		if c, ok := q.(io.Closer); ok {
			c.Close()
		}
	})
	return q
}

// walkPages follows a list's Next links from first to the end, then its
// Previous links back to the start, and checks that going back shows the
// same pages, that every link stays under the mount point, and that the
// first page is reached without a cursor. It returns the pages' row IDs.
func walkPages(t *testing.T, s *site, first string, rows func(response) []string) [][]string {
	t.Helper()
	var pages [][]string
	var urls []string
	u := s.url(first)
	for {
		if len(pages) > 20 {
			t.Fatal("pagination does not end")
		}
		r := s.page(strings.TrimPrefix(u, s.url("")))
		ids := rows(r)
		pages = append(pages, ids)
		urls = append(urls, u)
		if n := len(pages); n > 1 {
			if got := text(find(r.Doc, byID("page-no"))); got != fmt.Sprintf("Page %d", n) {
				t.Errorf("page %d says %q", n, got)
			}
			if find(r.Doc, byID("first-page")) == nil || find(r.Doc, byID("prev-page")) == nil {
				t.Errorf("page %d has no First or Previous link", n)
			}
		} else if find(r.Doc, byID("prev-page")) != nil || find(r.Doc, byID("first-page")) != nil {
			t.Error("the first page offers Previous or First")
		}
		next := find(r.Doc, byID("next-page"))
		if next == nil {
			break
		}
		u = resolve(t, u, attr(next, "href"))
		if !strings.HasPrefix(u, s.url("")) {
			t.Fatalf("next link leaves the mount point: %s", u)
		}
	}
	// Back, one page at a time.
	u = urls[len(urls)-1]
	for i := len(pages) - 1; i > 0; i-- {
		r := s.page(strings.TrimPrefix(u, s.url("")))
		prev := find(r.Doc, byID("prev-page"))
		if prev == nil {
			t.Fatalf("page %d has no Previous link", i+1)
		}
		u = resolve(t, u, attr(prev, "href"))
		if !strings.HasPrefix(u, s.url("")) {
			t.Fatalf("previous link leaves the mount point: %s", u)
		}
		if got := rows(s.page(strings.TrimPrefix(u, s.url("")))); !slices.Equal(got, pages[i-1]) {
			t.Errorf("Previous from page %d shows %d rows from %v, want page %d's %d rows from %v", i+1, len(got), head(got), i, len(pages[i-1]), head(pages[i-1]))
		}
	}
	if pu, _ := url.Parse(u); pu.Query().Has("after") || pu.Query().Has("page") {
		t.Errorf("Previous from page 2 went to %s, want the first page", u)
	}
	// First, from the last page.
	if len(pages) > 1 {
		r := s.page(strings.TrimPrefix(urls[len(urls)-1], s.url("")))
		fu := resolve(t, urls[len(urls)-1], attr(find(r.Doc, byID("first-page")), "href"))
		if got := rows(s.page(strings.TrimPrefix(fu, s.url("")))); !slices.Equal(got, pages[0]) {
			t.Errorf("First shows %v, want %v", got, pages[0])
		}
	}
	return pages
}

func checkPages(t *testing.T, pages [][]string, want []string, sizes ...int) {
	t.Helper()
	var all, got []string
	for _, p := range pages {
		all = append(all, p...)
		got = append(got, fmt.Sprint(len(p)))
	}
	var wantSizes []string
	for _, n := range sizes {
		wantSizes = append(wantSizes, fmt.Sprint(n))
	}
	if !slices.Equal(got, wantSizes) {
		t.Errorf("page sizes %v, want %v", got, wantSizes)
	}
	slices.Sort(all)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Errorf("the pages hold %d jobs, want the %d listed, each once", len(all), len(want))
	}
}

// Every keyset list goes forward and back, mounted under /admin, over
// every driver.
func TestKeysetPagesGoBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) queue.Queue
	}{
		{"memory", func(*testing.T) queue.Queue { return memqueue.New() }},
		{"sqlite", openSQLite},
		{"postgres", func(t *testing.T) queue.Queue { q, _ := openPostgres(t); return q }},
		{"mysql", openMySQL},
		{"redis", openRedisOne},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := tc.open(t)
			dead := deadJobs(t, q, "a", 2*dashboard.PageSize+7, `{"n":1}`, "x")
			deadJobs(t, q, "b", 3, `{}`, "y")
			var ready []string
			for range 3*dashboard.PageSize + 1 {
				j, _ := queue.NewJob(struct{}{}, queue.OnQueue("r"))
				if err := q.Push(context.Background(), j); err != nil {
					t.Fatal(err)
				}
				ready = append(ready, j.ID)
			}
			s := serve(t, dashboard.ForQueue(q))
			ids := func(r response) []string { return rowIDs(r.Doc) }

			pages := walkPages(t, s, "failed?queue=a", ids)
			checkPages(t, pages, dead, dashboard.PageSize, dashboard.PageSize, 7)
			pages = walkPages(t, s, "jobs?state=ready&queue=r", ids)
			checkPages(t, pages, ready, dashboard.PageSize, dashboard.PageSize, dashboard.PageSize, 1)

			// A filter carries through every page link.
			r := s.page("failed?queue=a")
			for _, id := range []string{"next-page"} {
				if h := attr(find(r.Doc, byID(id)), "href"); !strings.Contains(h, "queue=a") {
					t.Errorf("%s link %q drops the filter", id, h)
				}
			}
		})
	}
}

// A retry from page 2 comes back to page 2, whose Previous still works.
func TestActionKeepsThePage(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	deadJobs(t, q, "a", dashboard.PageSize+5, `{}`, "x")
	s := serve(t, dashboard.ForQueue(q))
	first := s.page("failed")
	p2 := s.url("failed")
	p2 = resolve(t, p2, attr(find(first.Doc, byID("next-page")), "href"))
	r := s.get(p2)
	ids := rowIDs(r.Doc)
	if len(ids) != 5 {
		t.Fatalf("page 2 has %d rows, want 5", len(ids))
	}
	after := s.follow(s.submit(p2, formWithAction(r.Doc, "failed/"+ids[0]+"/retry"), nil, nil))
	if got := text(find(after.Doc, byID("page-no"))); got != "Page 2" {
		t.Errorf("after a retry on page 2 the page says %q", got)
	}
	if got := rowIDs(after.Doc); !slices.Equal(got, ids[1:]) {
		t.Errorf("after a retry page 2 holds %v, want %v", got, ids[1:])
	}
	if find(after.Doc, byID("prev-page")) == nil {
		t.Error("after a retry page 2 has no Previous link")
	}
}

// A deep trail is cut at its last cursors: Previous works back that far,
// and First always works.
func TestDeepPagesKeepABoundedTrail(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ctx := context.Background()
	for range 60 {
		if err := q.Push(ctx, queue.Job{Queue: "d", Name: "N"}); err != nil {
			t.Fatal(err)
		}
	}
	s := serve(t, dashboard.ForQueue(q))
	// Collect the (opaque) cursors of one-job pages from the API, as if
	// the user had clicked Next 56 times.
	var trail []string
	after := ""
	for range 56 {
		path := "api/jobs?state=ready&queue=d&limit=1"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
			trail = append(trail, after)
		}
		var page struct {
			Next string `json:"next"`
		}
		if err := json.Unmarshal([]byte(s.page(path).Body), &page); err != nil {
			t.Fatal(err)
		}
		after = page.Next
	}
	v := url.Values{"state": {"ready"}, "queue": {"d"}}
	v.Set("after", after)
	v["back"] = trail
	v.Set("page", "57")
	u := s.url("jobs?" + v.Encode())
	r := s.get(u)
	if r.StatusCode != 200 {
		t.Fatalf("deep page: %d", r.StatusCode)
	}
	prev := find(r.Doc, byID("prev-page"))
	if prev == nil {
		t.Fatal("no Previous on page 57")
	}
	pu, _ := url.Parse(resolve(t, u, attr(prev, "href")))
	if n := len(pu.Query()["back"]); n != 49 {
		t.Errorf("Previous from page 57 carries %d cursors, want the trail cut to 50 less the one popped", n)
	}
	if pu.Query().Get("page") != "56" {
		t.Errorf("Previous from page 57 is page %s", pu.Query().Get("page"))
	}
	if find(r.Doc, byID("first-page")) == nil {
		t.Error("no First on page 57")
	}
}

// Cookbook mode pages by number, forward and back.
func TestCookbookPagesGoBack(t *testing.T) {
	t.Parallel()
	failed := dashboard.NewMemoryFailedJobs(nil)
	var want []string
	for i := range dashboard.PageSize + 3 {
		id := fmt.Sprintf("job-%03d", i)
		failed.Record(queue.Job{ID: id, Name: "N"}, "emails", errors.New("x"))
		want = append(want, id)
	}
	s := serve(t, dashboard.NewInspector(dashboard.NewStats(), failed))
	pages := walkPages(t, s, "failed", func(r response) []string { return rowIDs(r.Doc) })
	checkPages(t, pages, want, dashboard.PageSize, 3)
}

// The workers page lists PageSize workers a page, forward and back, from
// the memory driver's registry, SQLite's and Redis'.
func TestWorkersPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) queue.Queue
	}{
		{"memory", func(*testing.T) queue.Queue { return memqueue.New() }},
		{"sqlite", openSQLite},
		{"redis", openRedisOne},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := tc.open(t)
			reg := q.(driver.Reporter)
			now := time.Now()
			var want []string
			for i := range dashboard.PageSize + 2 {
				id := fmt.Sprintf("w-%03d", i)
				w := driver.WorkerInfo{ID: id, Host: "box", PID: i, Queues: []string{"a"}, Concurrency: 2, StartedAt: now, LastSeen: now}
				if err := reg.Heartbeat(context.Background(), w); err != nil {
					t.Fatal(err)
				}
				want = append(want, id)
			}
			s := serve(t, dashboard.ForQueue(q))
			rows := func(r response) []string {
				var ids []string
				for _, tr := range findAll(r.Doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-worker") != "" }) {
					ids = append(ids, attr(tr, "data-worker"))
				}
				return ids
			}
			pages := walkPages(t, s, "workers", rows)
			checkPages(t, pages, want, dashboard.PageSize, 2)
			r := s.page("workers")
			stat := func(name string) string {
				return text(find(r.Doc, func(n *html.Node) bool { return attr(n, "data-stat") == name }))
			}
			if got := stat("workers"); got != fmt.Sprint(len(want)) {
				t.Errorf("worker count shows %q, want %d", got, len(want))
			}
			if got := stat("concurrency"); got != fmt.Sprint(2*len(want)) {
				t.Errorf("total concurrency shows %q, want %d", got, 2*len(want))
			}
		})
	}
}

// head is the first of ids, for short failure messages.
func head(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return ids[0]
}
