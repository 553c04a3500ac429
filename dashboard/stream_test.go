package dashboard_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// gatedScan is a queue whose payload searches examine at most scan jobs
// per call (scanBound) and whose second search call waits: it sends the
// IDs the first call found on entered, then waits for release, or for
// the request's end, and answers fail when set, else the store's answer.
// So a test can read what a page sent before the search went on.
type gatedScan struct {
	inspectQueue
	scan    int
	fail    error
	entered chan []string // buffered: the second call has begun
	release chan struct{}
	once    sync.Once

	mu    sync.Mutex
	calls int      // search calls
	first []string // the IDs the first call found
	ended error    // the second call's context error, when it ended so
}

func newGatedScan(t *testing.T, q queue.Queue, scan int, fail error) *gatedScan {
	g := &gatedScan{inspectQueue: q.(inspectQueue), scan: scan, fail: fail,
		entered: make(chan []string, 1), release: make(chan struct{})}
	t.Cleanup(g.open) // a test that stops early leaves no call waiting
	return g
}

// open lets the second call go on.
func (g *gatedScan) open() { g.once.Do(func() { close(g.release) }) }

func (g *gatedScan) searchCalls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

func (g *gatedScan) ListJobs(ctx context.Context, f driver.JobFilter) (driver.JobPage, error) {
	if f.Search == "" {
		return g.inspectQueue.ListJobs(ctx, f)
	}
	f.Scan = g.scan
	g.mu.Lock()
	g.calls++
	n, first := g.calls, g.first
	g.mu.Unlock()
	if n == 2 {
		g.entered <- first
		select {
		case <-g.release:
		case <-ctx.Done():
			g.mu.Lock()
			g.ended = ctx.Err()
			g.mu.Unlock()
			return driver.JobPage{}, ctx.Err()
		}
		if g.fail != nil {
			return driver.JobPage{}, g.fail
		}
	}
	p, err := g.inspectQueue.ListJobs(ctx, f)
	if n == 1 {
		g.mu.Lock()
		for _, j := range p.Jobs {
			g.first = append(g.first, j.ID)
		}
		g.mu.Unlock()
	}
	return p, err
}

// serveWrapped is serve with the dashboard's handler wrapped by wrap
// (nil for none) and done closed each time it has returned.
func serveWrapped(t *testing.T, wrap func(http.Handler) http.Handler, done chan<- struct{}, src dashboard.Source, opts ...dashboard.Option) *site {
	t.Helper()
	var h http.Handler = http.StripPrefix(mountPrefix, dashboard.Handler(src, opts...))
	if wrap != nil {
		h = wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/queues/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if done != nil {
			done <- struct{}{}
		}
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &site{t: t, srv: srv, c: c}
}

// plainWriter hides the server's http.Flusher: the dashboard renders
// its pages whole.
type plainWriter struct{ http.ResponseWriter }

func unflushed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(plainWriter{w}, r) })
}

// searchJobs fills q with failed jobs of queue mail for a search of
// "needle" over windows of 10 (newest first): the newest matches, in the
// first window; 9 that do not; then 3 older that match, in the second.
func searchJobs(t *testing.T, q queue.Queue) (all []string) {
	t.Helper()
	old := deadJobs(t, q, "mail", 3, `{"to":"needle"}`, "boom")
	deadJobs(t, q, "mail", 9, `{"to":"someone"}`, "boom")
	newest := deadJobs(t, q, "mail", 1, `{"to":"needle"}`, "boom <b>")
	return append(newest, old...)
}

// readUntil reads body into *got until it holds every one of want.
func readUntil(t *testing.T, body io.Reader, got *strings.Builder, want ...string) {
	t.Helper()
	buf := make([]byte, 4096)
	for {
		all := true
		for _, w := range want {
			all = all && strings.Contains(got.String(), w)
		}
		if all {
			return
		}
		n, err := body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("the body ended (%v) before it held %q:\n%s", err, want, got.String())
		}
	}
}

func rowMarks(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = `<tr data-id="` + id + `">`
	}
	return out
}

// TestSearchStreamsRows: a page that searches sends the rows of the
// search's first window before the search goes on: the store's second
// call waits until the test has read them from the response. Then the
// page goes on with the second window's rows and ends as a page does.
// On memqueue and SQLite.
func TestSearchStreamsRows(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) queue.Queue{
		"memqueue": func(*testing.T) queue.Queue { return memqueue.New() },
		"sqlite":   openSQLite,
	} {
		t.Run(name, func(t *testing.T) {
			q := open(t)
			want := searchJobs(t, q)
			g := newGatedScan(t, q, 10, nil)
			s := serveWrapped(t, nil, nil, dashboard.ForQueue(g),
				dashboard.SearchBudget(time.Minute), dashboard.RequestTimeout(2*time.Minute))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard, not a measure
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url("failed?q=needle"), nil)
			res, err := s.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK || res.Header.Get("Content-Security-Policy") == "" || res.Header.Get("X-Frame-Options") != "DENY" {
				t.Fatalf("status %d, headers %v: want 200 with the security headers", res.StatusCode, res.Header)
			}
			first := <-g.entered // the second call waits
			if len(first) == 0 {
				t.Fatal("the first window found no match: the test's jobs do not make two windows")
			}
			var got strings.Builder
			readUntil(t, res.Body, &got, rowMarks(first)...)
			if strings.Contains(got.String(), "</html>") {
				t.Fatal("the page ended before the search went on")
			}
			// The forms of the rows sent carry the CSRF token of the
			// cookie the page set, as a page rendered whole does.
			var token string
			for _, c := range res.Cookies() {
				if c.Value != "" && c.HttpOnly {
					token = c.Value
				}
			}
			if token == "" || !strings.Contains(got.String(), `name="csrf_token" value="`+token+`"`) {
				t.Fatalf("the streamed rows do not carry the CSRF cookie's token (cookies %v)", res.Cookies())
			}
			g.open()
			b, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			got.Write(b)
			body := got.String()
			doc, err := html.Parse(strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			ids := rowIDs(doc)
			if strings.Join(sorted(ids), ",") != strings.Join(sorted(want), ",") {
				t.Fatalf("rows %v, want %v", ids, want)
			}
			if !strings.HasSuffix(body, "</html>") || find(doc, byID("search-stopped")) != nil || find(doc, byID("no-jobs")) != nil {
				t.Fatalf("the page does not end as a finished search's does:\n%s", body)
			}
			if n := g.searchCalls(); n != 2 {
				t.Errorf("%d search calls, want 2", n)
			}
		})
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestSearchStreamStoreError: a store error after the page began ends
// the table with a row that says the search stopped and that the log
// has why (the store's error text, which can name tables and hosts, is
// not shown),
// and the page closes as usual, with a next page that goes on from
// where the search stopped; an error of the search's first call, before
// anything was written, is the error page with its status.
func TestSearchStreamStoreError(t *testing.T) {
	var q queue.Queue = memqueue.New()
	searchJobs(t, q)
	g := newGatedScan(t, q, 10, errors.New(`disk <b>on fire</b> & "smoking"`))
	g.open()
	s := serveWrapped(t, nil, nil, dashboard.ForQueue(g), dashboard.SearchBudget(time.Minute), dashboard.RequestTimeout(2*time.Minute))
	r := s.page("failed?q=needle")
	if !strings.HasSuffix(r.Body, "</html>") {
		t.Fatalf("the page is not closed:\n%s", r.Body)
	}
	row := find(r.Doc, byID("search-stopped"))
	if row == nil {
		t.Fatalf("no search-stopped row:\n%s", r.Body)
	}
	if msg := text(row); !strings.Contains(msg, "stopped") || !strings.Contains(msg, "server log") {
		t.Errorf("the stopped row says %q, want that the search stopped and the log has why", msg)
	}
	if strings.Contains(r.Body, "on fire") {
		t.Error("the page shows the store's error")
	}
	if row.Parent == nil || row.Parent.Data != "tbody" {
		t.Errorf("the stopped row is not a row of the table's body")
	}
	cols := len(findAll(find(r.Doc, byTag("thead")), byTag("th")))
	if span := attr(find(row, byTag("td")), "colspan"); span != strconv.Itoa(cols) {
		t.Errorf("the stopped row spans %s columns, the table has %d", span, cols)
	}
	if len(rowIDs(r.Doc)) != len(<-g.entered) {
		t.Errorf("rows %v: want the first window's", rowIDs(r.Doc))
	}
	if find(r.Doc, byID("next-page")) == nil {
		t.Error("no next page to go on from where the search stopped")
	}

	// The first call fails: nothing was written, so it is the error page.
	failing := serveWrapped(t, nil, nil, dashboard.ForQueue(failList{q.(inspectQueue)}))
	if r := failing.get(failing.url("failed?q=needle")); r.StatusCode != http.StatusServiceUnavailable || find(r.Doc, byID("jobs")) != nil {
		t.Fatalf("a search whose first call fails: %d\n%s", r.StatusCode, r.Body)
	}
}

// failList fails every search.
type failList struct{ inspectQueue }

func (f failList) ListJobs(ctx context.Context, fl driver.JobFilter) (driver.JobPage, error) {
	if fl.Search != "" {
		return driver.JobPage{}, errors.New("store down")
	}
	return f.inspectQueue.ListJobs(ctx, fl)
}

// TestSearchStreamClientGone: a client that goes away while a search
// streams stops the search: the store's call under way ends with the
// request's context, and no call follows it.
func TestSearchStreamClientGone(t *testing.T) {
	q := memqueue.New()
	searchJobs(t, q)
	g := newGatedScan(t, q, 10, nil)
	done := make(chan struct{}, 1)
	s := serveWrapped(t, nil, done, dashboard.ForQueue(g), dashboard.SearchBudget(time.Minute), dashboard.RequestTimeout(2*time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url("failed?q=needle"), nil)
	res, err := s.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := <-g.entered
	var got strings.Builder
	readUntil(t, res.Body, &got, rowMarks(first)...)
	cancel() // the client goes away
	res.Body.Close()
	<-done // the handler has returned
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.calls != 2 || !errors.Is(g.ended, context.Canceled) {
		t.Fatalf("%d search calls, the second ended with %v; want 2, the second ended by the client's leaving", g.calls, g.ended)
	}
}

// volatile is what differs between two renderings of one page: the
// times read and relative times, and the form token.
var volatile = regexp.MustCompile(`(?s)<time.*?</time>|<td class="when".*?</td>|csrf_token" value="[^"]*"`)

// TestSearchStreamSamePage: a search page written as the search goes is
// the page rendered whole for the same result, for a search that ends
// and one that a store error stops; a page that does not search is not
// streamed (rendered whole and never flushed, as before).
func TestSearchStreamSamePage(t *testing.T) {
	q := memqueue.New()
	searchJobs(t, q)
	for _, fail := range []error{nil, errors.New("store <down>")} {
		var pages [2]string
		for i, wrap := range []func(http.Handler) http.Handler{nil, unflushed} {
			g := newGatedScan(t, q, 10, fail)
			g.open()
			s := serveWrapped(t, wrap, nil, dashboard.ForQueue(g), dashboard.SearchBudget(time.Minute), dashboard.RequestTimeout(2*time.Minute))
			r := s.page("failed?q=needle")
			if i == 0 && r.Header.Get("X-Accel-Buffering") != "no" {
				t.Errorf("the streamed page has no X-Accel-Buffering: no")
			}
			if i == 1 && r.Header.Get("X-Accel-Buffering") != "" {
				t.Errorf("the page rendered whole has X-Accel-Buffering")
			}
			pages[i] = volatile.ReplaceAllString(r.Body, "…")
		}
		if pages[0] != pages[1] {
			t.Errorf("store error %v: the streamed page differs from the page rendered whole:\n%s\n----\n%s", fail, pages[0], pages[1])
		}
	}

	h := dashboard.Handler(dashboard.ForQueue(q))
	for _, u := range []string{"/queues/failed", "/queues/jobs?state=ready", "/queues/failed?q=needle"} {
		req := httptest.NewRequest(http.MethodGet, u, nil)
		req.RemoteAddr = "127.0.0.1:5000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", u, rec.Code)
		}
		if search := strings.Contains(u, "q="); rec.Flushed != search {
			t.Errorf("%s: flushed %v, want %v", u, rec.Flushed, search)
		}
	}
}

// TestAPIJobsNDJSON: api/jobs?q= with Accept: application/x-ndjson sends
// one JSON object a line per matching job, the first window's before the
// search goes on, then an end line with where the list ended; a store
// error after the answer began is the end line's error.
func TestAPIJobsNDJSON(t *testing.T) {
	var q queue.Queue = memqueue.New()
	want := searchJobs(t, q)
	g := newGatedScan(t, q, 10, nil)
	s := serveWrapped(t, nil, nil, dashboard.ForQueue(g), dashboard.SearchBudget(time.Minute), dashboard.RequestTimeout(2*time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard, not a measure
	defer cancel()
	get := func() *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url("api/jobs?state=dead&q=needle"), nil)
		req.Header.Set("Accept", "application/x-ndjson")
		res, err := s.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
		}
		return res
	}
	lines := func(body string) (ids []string, end map[string]any) {
		t.Helper()
		for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			m := decode(t, l)
			if m["end"] == true {
				if end != nil {
					t.Fatalf("two end lines:\n%s", body)
				}
				end = m
				continue
			}
			if end != nil {
				t.Fatalf("a line after the end line:\n%s", body)
			}
			ids = append(ids, m["id"].(string))
		}
		if end == nil {
			t.Fatalf("no end line:\n%s", body)
		}
		return ids, end
	}

	res := get()
	defer res.Body.Close()
	first := <-g.entered
	var got strings.Builder
	marks := make([]string, len(first))
	for i, id := range first {
		marks[i] = `"id":"` + id + `"`
	}
	readUntil(t, res.Body, &got, marks...)
	g.open()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	got.Write(b)
	ids, end := lines(got.String())
	if strings.Join(sorted(ids), ",") != strings.Join(sorted(want), ",") {
		t.Fatalf("jobs %v, want %v", ids, want)
	}
	if end["state"] != "dead" || end["next"] != nil || end["error"] != nil {
		t.Errorf("end line %v, want state dead, no next and no error", end)
	}

	g = newGatedScan(t, q, 10, errors.New("store <down>"))
	g.open()
	s = serveWrapped(t, nil, nil, dashboard.ForQueue(g), dashboard.SearchBudget(time.Minute), dashboard.RequestTimeout(2*time.Minute))
	res2 := get()
	defer res2.Body.Close()
	b, err = io.ReadAll(res2.Body)
	if err != nil {
		t.Fatal(err)
	}
	ids, end = lines(string(b))
	if len(ids) != len(<-g.entered) || end["next"] == nil || !strings.Contains(end["error"].(string), "search stopped") || strings.Contains(end["error"].(string), "store <down>") {
		t.Errorf("a search stopped by the store: jobs %v, end %v; want the first window's, a next cursor and the error", ids, end)
	}
}
