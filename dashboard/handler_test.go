package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// cookbookSite wires the dashboard the way the cookbook does.
func cookbookSite(t *testing.T) (*site, *dashboard.Stats, *dashboard.MemoryFailedJobs, *[]queue.Job) {
	var requeued []queue.Job
	stats := dashboard.NewStats()
	failed := dashboard.NewMemoryFailedJobs(func(_ context.Context, j queue.Job) error {
		requeued = append(requeued, j)
		return nil
	}).WithStats(stats)
	return serve(t, dashboard.NewInspector(stats, failed)), stats, failed, &requeued
}

func TestCookbookModeOverviewAndRetry(t *testing.T) {
	t.Parallel()
	s, stats, failed, requeued := cookbookSite(t)
	stats.OnPushed("emails")
	stats.OnPushed("emails")
	stats.OnProcessed("emails")
	stats.OnFailed("emails")
	failed.Record(queue.Job{ID: "job-1", Name: "SendWelcomeEmail", Payload: []byte(`{"UserID":42}`)}, "emails", errors.New("smtp timeout"))
	failed.Record(queue.Job{ID: "job-2", Name: "SendWelcomeEmail"}, "emails", errors.New("smtp timeout"))

	ov := s.page("")
	row := find(ov.Doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-queue") == "emails" })
	if row == nil {
		t.Fatalf("overview has no row for queue emails:\n%s", ov.Body)
	}
	var cells []string
	for _, td := range findAll(row, byTag("td")) {
		cells = append(cells, text(td))
	}
	// Queue, Pending, Processed, Retried, Failed, Jobs/min.
	if want := []string{"emails", "0", "1", "0", "1", "1.0"}; !slices.Equal(cells, want) {
		t.Errorf("emails row = %q, want %q", cells, want)
	}

	// The throughput chart comes from the Stats' minute counts.
	if bars := findAll(ov.Doc, func(n *html.Node) bool { return n.Data == "rect" }); len(bars) != 2 {
		t.Errorf("cookbook chart has %d bars, want one processed and one failed", len(bars))
	}

	list := s.page("failed")
	if ids := rowIDs(list.Doc); !slices.Equal(ids, []string{"job-2", "job-1"}) {
		t.Fatalf("failed list = %v, want [job-2 job-1]", ids)
	}
	form := formWithAction(list.Doc, "failed/job-1/retry")
	if form == nil {
		t.Fatal("no retry form for job-1")
	}
	after := s.follow(s.submit(s.url("failed"), form, nil, nil))
	if ids := rowIDs(after.Doc); !slices.Equal(ids, []string{"job-2"}) {
		t.Errorf("after retry the failed list = %v, want [job-2]", ids)
	}
	if len(*requeued) != 1 || (*requeued)[0].ID != "job-1" {
		t.Errorf("requeued %+v, want job-1", *requeued)
	}
	if f := find(after.Doc, func(n *html.Node) bool { return n.Data == "p" && strings.Contains(attr(n, "class"), "flash") }); !strings.Contains(text(f), "Retried 1 job") {
		t.Errorf("flash = %q", text(f))
	}

	// The job detail page of a cookbook store, then flush.
	detail := s.page("jobs/job-2")
	if got := text(find(detail.Doc, byID("last-error"))); got != "smtp timeout" {
		t.Errorf("last error = %q", got)
	}
	// The other pages answer in cookbook mode too.
	for _, p := range []string{"queue/emails", "jobs?state=ready&queue=emails", "api/stats", "api/jobs?state=dead"} {
		s.page(p)
	}
	if r := s.get(s.url("workers")); r.StatusCode != http.StatusNotFound {
		t.Errorf("workers page without a registry: %d, want 404", r.StatusCode)
	}
	flushed := s.follow(s.submit(s.url("failed"), formWithAction(list.Doc, "failed/flush"), nil, nil))
	if ids := rowIDs(flushed.Doc); len(ids) != 0 || failed.Len() != 0 {
		t.Errorf("after flush: rows %v, store %d", ids, failed.Len())
	}
}

func TestDriverModeRetryLeavesFailedList(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 3, `{"UserID":1}`, "smtp: 550")
	s := serve(t, dashboard.ForQueue(q))

	list := s.page("failed")
	if got := rowIDs(list.Doc); len(got) != 3 {
		t.Fatalf("failed list has %d rows, want 3", len(got))
	}
	detail := s.page("jobs/" + ids[1])
	retry := find(detail.Doc, func(n *html.Node) bool { return n.Data == "form" && find(n, byID("retry")) != nil })
	if retry == nil {
		t.Fatalf("job page has no retry form:\n%s", detail.Body)
	}
	after := s.follow(s.submit(s.url("jobs/"+ids[1]), retry, nil, nil))
	if after.Request.URL.Path != "/admin/queues/failed" {
		t.Errorf("retry from the job page went to %s, want the failed list", after.Request.URL.Path)
	}
	if got := rowIDs(after.Doc); slices.Contains(got, ids[1]) || len(got) != 2 {
		t.Errorf("after retry the failed list = %v, want the two others", got)
	}
	j, err := q.GetJob(context.Background(), ids[1])
	if err != nil || j.State != queue.StateReady || j.Attempts != 0 {
		t.Errorf("retried job: %+v, %v; want ready with attempts reset", j.State, err)
	}

	// Retrying it again (a stale page) is reported, not an error page.
	again := s.follow(s.submit(s.url("jobs/"+ids[1]), retry, nil, nil))
	if f := text(find(again.Doc, func(n *html.Node) bool { return strings.Contains(attr(n, "class"), "flash bad") })); !strings.Contains(f, "no longer a failed job") {
		t.Errorf("stale retry flash = %q", f)
	}
}

func TestLinksStayUnderTheMountPoint(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 2, `{}`, "x")
	s := serve(t, dashboard.ForQueue(q))
	pages := []string{"", "failed", "jobs", "jobs?state=scheduled&queue=emails", "jobs/" + ids[0], "queue/emails", "workers"}
	seen := map[string]bool{}
	for _, p := range pages {
		r := s.page(p)
		for _, n := range findAll(r.Doc, func(n *html.Node) bool {
			return (n.Data == "a" || n.Data == "link") && hasAttr(n, "href") || n.Data == "form" || n.Data == "script"
		}) {
			ref := attr(n, "href") + attr(n, "action") + attr(n, "src")
			u := resolve(t, s.url(p), ref)
			if !strings.HasPrefix(u, s.srv.URL+"/admin/queues/") {
				t.Errorf("page %q: <%s> %q resolves to %s, outside /admin/queues/", p, n.Data, ref, u)
			}
			if n.Data != "form" && !seen[u] {
				seen[u] = true
				if res := s.get(u); res.StatusCode != http.StatusOK {
					t.Errorf("page %q: link %q (%s) answers %d", p, ref, u, res.StatusCode)
				}
			}
		}
	}
	// Without the trailing slash the root redirects into it.
	r := s.get(s.srv.URL + "/admin/queues")
	if r.StatusCode/100 != 3 {
		t.Fatalf("GET /admin/queues = %d", r.StatusCode)
	}
	if u := resolve(t, s.srv.URL+"/admin/queues", r.Header.Get("Location")); u != s.srv.URL+"/admin/queues/" {
		t.Errorf("GET /admin/queues redirects to %s", u)
	}
}

func TestCSRFCookieIsScopedToTheMountPoint(t *testing.T) {
	t.Parallel()
	s, _, _, _ := cookbookSite(t)
	r := s.page("failed")
	var path string
	for _, c := range r.Cookies() {
		if c.Name == "meridian_csrf" {
			path = c.Path
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Errorf("cookie flags: %+v", c)
			}
		}
	}
	if path != "/admin/queues/" {
		t.Errorf("CSRF cookie path = %q, want /admin/queues/", path)
	}
}

func TestCrossSiteActionsRefused(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 1, `{}`, "x")
	s := serve(t, dashboard.ForQueue(q))
	list := s.page("failed")
	form := formWithAction(list.Doc, "failed/"+ids[0]+"/retry")
	var token string
	if in := find(form, func(n *html.Node) bool { return attr(n, "name") == "csrf_token" }); in != nil {
		token = attr(in, "value")
	}
	if token == "" {
		t.Fatal("retry form carries no token")
	}
	cases := []struct {
		name    string
		headers map[string]string
		token   string
	}{
		{"cross-site fetch metadata", map[string]string{"Sec-Fetch-Site": "cross-site"}, token},
		{"foreign Origin", map[string]string{"Origin": "https://evil.example"}, token},
		{"no token", map[string]string{"Sec-Fetch-Site": "same-origin"}, ""},
		{"wrong token", map[string]string{"Sec-Fetch-Site": "same-origin"}, strings.Repeat("ab", 32)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := url.Values{"csrf_token": {c.token}, "return": {"failed"}}.Encode()
			req, _ := http.NewRequest(http.MethodPost, s.url("failed/"+ids[0]+"/retry"), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			r := s.do(req)
			if r.StatusCode != http.StatusForbidden {
				t.Errorf("status %d, want 403 (Location %q)", r.StatusCode, r.Header.Get("Location"))
			}
			if j, _ := q.GetJob(context.Background(), ids[0]); j.State != queue.StateDead {
				t.Errorf("refused request changed the job: %s", j.State)
			}
		})
	}
	// GET on an action is not allowed.
	if r := s.get(s.url("failed/" + ids[0] + "/retry")); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET on retry = %d, want 405", r.StatusCode)
	}
}

func TestDefaultAccessIsLoopbackOnly(t *testing.T) {
	t.Parallel()
	h := http.StripPrefix("/admin", dashboard.Handler(dashboard.NewInspector(nil, nil)))
	cases := []struct {
		name   string
		remote string
		header string
		value  string
		want   int
		why    string
	}{
		{"loopback v4", "127.0.0.1:5000", "", "", 200, ""},
		{"loopback v6", "[::1]:5000", "", "", 200, ""},
		{"remote", "203.0.113.9:5000", "", "", 403, "203.0.113.9"},
		{"proxied X-Forwarded-For", "127.0.0.1:5000", "X-Forwarded-For", "198.51.100.1", 403, "X-Forwarded-For"},
		{"proxied Forwarded", "127.0.0.1:5000", "Forwarded", "for=198.51.100.1", 403, "Forwarded"},
		{"proxied X-Forwarded-Proto", "127.0.0.1:5000", "X-Forwarded-Proto", "https", 403, "X-Forwarded-Proto"},
		{"proxied X-Client-IP", "127.0.0.1:5000", "X-Client-IP", "198.51.100.1", 403, "X-Client-Ip"},
		{"proxied True-Client-IP", "127.0.0.1:5000", "True-Client-IP", "198.51.100.1", 403, "True-Client-Ip"},
		{"proxied CF-Connecting-IP", "[::1]:5000", "CF-Connecting-IP", "198.51.100.1", 403, "Cf-Connecting-Ip"},
		{"empty X-Real-IP", "127.0.0.1:5000", "X-Real-IP", "", 403, "X-Real-Ip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range []string{"/admin/queues/", "/admin/queues/api/stats"} {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.RemoteAddr = c.remote
				if c.header != "" {
					req.Header[http.CanonicalHeaderKey(c.header)] = []string{c.value}
				}
				if got := dashboard.IsLocal(req); got != (c.want == 200) {
					t.Errorf("IsLocal = %v, want %v", got, c.want == 200)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != c.want {
					t.Fatalf("%s: status %d, want %d", path, rec.Code, c.want)
				}
				if c.want != 403 {
					continue
				}
				const rule = "The dashboard answers only local requests unless you configure Authorize."
				if strings.HasSuffix(path, "api/stats") {
					var body struct{ Error string }
					if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
						t.Errorf("api refusal Content-Type %q, want application/json", ct)
					}
					if err := json.NewDecoder(rec.Body).Decode(&body); err != nil || !strings.Contains(body.Error, c.why) || !strings.Contains(body.Error, rule) {
						t.Errorf("api refusal = %+v, %v; want an error naming %q and the rule", body, err, c.why)
					}
					continue
				}
				doc, err := html.Parse(rec.Body)
				if err != nil {
					t.Fatal(err)
				}
				if why := text(find(doc, byID("why"))); !strings.Contains(why, c.why) || !strings.Contains(why, rule) {
					t.Errorf("refusal reason %q does not mention %q and the rule", why, c.why)
				}
				if body := text(doc); !strings.Contains(body, "dashboard.Authorize") || !strings.Contains(body, "--basic-auth") {
					t.Errorf("refusal page does not say how to configure access:\n%s", body)
				}
			}
		})
	}
}

func TestAuthorizeReadOnly(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 1, `{}`, "x")
	readOnly := dashboard.Authorize(func(r *http.Request) (bool, bool) { return r.Header.Get("X-User") != "", false })
	s := serve(t, dashboard.ForQueue(q), readOnly)

	req, _ := http.NewRequest(http.MethodGet, s.url("failed"), nil)
	if r := s.do(req); r.StatusCode != http.StatusForbidden || !strings.Contains(text(find(r.Doc, byID("why"))), "Authorize") {
		t.Errorf("anonymous read: %d %q", r.StatusCode, text(find(r.Doc, byID("why"))))
	}
	req.Header.Set("X-User", "ann")
	r := s.do(req)
	if r.StatusCode != 200 {
		t.Fatalf("reader: %d", r.StatusCode)
	}
	if posts := findAll(r.Doc, func(n *html.Node) bool { return n.Data == "form" && attr(n, "method") == "post" }); len(posts) != 0 {
		t.Errorf("a reader who may not act sees %d action forms", len(posts))
	}
	post, _ := http.NewRequest(http.MethodPost, s.url("failed/"+ids[0]+"/retry"), nil)
	post.Header.Set("X-User", "ann")
	if r := s.do(post); r.StatusCode != http.StatusForbidden {
		t.Errorf("reader's POST = %d, want 403", r.StatusCode)
	}
}

func TestEverythingIsEscaped(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 1, `{"html":"<script>alert(1)</script>"}`, `<img src=x onerror=alert(2)>`, queue.Tags("<b>tag</b>"))
	s := serve(t, dashboard.ForQueue(q))
	for _, p := range []string{"failed", "jobs/" + ids[0]} {
		r := s.page(p)
		for _, sc := range findAll(r.Doc, byTag("script")) {
			if attr(sc, "src") == "" {
				t.Errorf("%s: inline <script> element: %s", p, text(sc))
			}
		}
		if imgs := findAll(r.Doc, byTag("img")); len(imgs) != 0 {
			t.Errorf("%s: the error became an <img> element", p)
		}
		if bs := findAll(r.Doc, byTag("b")); len(bs) != 0 {
			t.Errorf("%s: a tag became a <b> element", p)
		}
	}
	r := s.page("jobs/" + ids[0])
	if got := text(find(r.Doc, byID("payload"))); !strings.Contains(got, `"html": "<script>alert(1)</script>"`) {
		t.Errorf("payload shown as %q, want the pretty JSON as text", got)
	}
	if got := text(find(r.Doc, byID("last-error"))); got != `<img src=x onerror=alert(2)>` {
		t.Errorf("error shown as %q", got)
	}
}

func TestSecurityHeadersAndNoInlineStyle(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	deadJobs(t, q, "emails", 1, `{}`, "x")
	q.ObserveRun(driver.RunRecord{Queue: "emails", Start: time.Now(), Runtime: 30 * time.Millisecond, Outcome: driver.OutcomeDone})
	s := serve(t, dashboard.ForQueue(q))
	for _, p := range []string{"", "failed", "queue/emails"} {
		r := s.page(p)
		csp := r.Header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "default-src 'none'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		if n := find(r.Doc, func(n *html.Node) bool { return hasAttr(n, "style") || n.Data == "style" }); n != nil {
			t.Errorf("%s: inline style on <%s>, which the CSP blocks", p, n.Data)
		}
		for _, n := range findAll(r.Doc, func(n *html.Node) bool { return n.Data == "link" || n.Data == "script" }) {
			if u := attr(n, "href") + attr(n, "src"); strings.Contains(u, "//") {
				t.Errorf("%s: external asset %q", p, u)
			}
		}
	}
	js := s.get(s.url("assets/app.js"))
	if js.StatusCode != 200 || !strings.Contains(js.Header.Get("Content-Type"), "javascript") {
		t.Errorf("app.js: %d %s", js.StatusCode, js.Header.Get("Content-Type"))
	}
}

func TestChartsAreServerRenderedSVG(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	now := time.Now()
	for i := range 5 {
		q.ObserveRun(driver.RunRecord{Queue: "emails", Start: now.Add(-time.Duration(i) * time.Minute), Runtime: time.Duration(i+1) * 10 * time.Millisecond, Outcome: driver.OutcomeDone})
	}
	q.ObserveRun(driver.RunRecord{Queue: "emails", Start: now, Runtime: time.Millisecond, Outcome: driver.OutcomeFailed})
	s := serve(t, dashboard.ForQueue(q))
	r := s.page("")
	svgs := findAll(r.Doc, byTag("svg"))
	if len(svgs) != 2 {
		t.Fatalf("%d charts, want throughput and runtime", len(svgs))
	}
	ok := findAll(svgs[0], func(n *html.Node) bool { return n.Data == "rect" && attr(n, "class") == "ok" })
	bad := findAll(svgs[0], func(n *html.Node) bool { return n.Data == "rect" && attr(n, "class") == "bad" })
	if len(ok) != 5 || len(bad) != 1 {
		t.Errorf("throughput chart: %d processed bars and %d failed, want 5 and 1", len(ok), len(bad))
	}
	if lines := findAll(svgs[1], byTag("polyline")); len(lines) != 2 || attr(lines[0], "points") == "" {
		t.Errorf("runtime chart lines: %d", len(lines))
	}
}

// cappedQueue reports its counts as capped, as a SQL driver does past its
// count limit.
type cappedQueue struct{ *memqueue.Queue }

func (c cappedQueue) QueueStats(ctx context.Context) ([]driver.QueueStats, error) {
	qs, err := c.Queue.QueueStats(ctx)
	for i := range qs {
		qs[i].Ready = driver.Count{N: 10000, More: true}
	}
	return qs, err
}

func TestCappedCountsShowAsAtLeast(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	if err := queue.Dispatch(context.Background(), q, struct{ N int }{1}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(cappedQueue{q}))
	r := s.page("")
	if got := text(find(r.Doc, func(n *html.Node) bool { return attr(n, "data-stat") == "pending" })); got != "10,000+" {
		t.Errorf("pending shows %q, want 10,000+", got)
	}
	// The state tabs of the job lists count the same way, for all queues
	// and for a queue filter; a name filter hides the counts, which would
	// not match the list.
	tab := func(r response, st string) string {
		return text(find(find(r.Doc, func(n *html.Node) bool { return attr(n, "data-state") == st }), func(n *html.Node) bool { return attr(n, "class") == "count" }))
	}
	for _, p := range []string{"jobs?state=scheduled", "failed?queue=default"} {
		r := s.page(p)
		if got := tab(r, "ready"); got != "10,000+" {
			t.Errorf("%s: ready tab counts %q, want 10,000+", p, got)
		}
		if got := tab(r, "dead"); got != "0" {
			t.Errorf("%s: failed tab counts %q, want 0", p, got)
		}
	}
	if got := tab(s.page("jobs?state=ready&name=Other"), "ready"); got != "" {
		t.Errorf("a name filter still shows the ready count %q", got)
	}
}

func TestFiltersAndKeysetPages(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	a := deadJobs(t, q, "a", 2*dashboard.PageSize+5, `{"n":1}`, "x")
	b := deadJobs(t, q, "b", 3, `{"needle":"findme"}`, "y", queue.Tags("vip"))
	s := serve(t, dashboard.ForQueue(q))

	seen := map[string]bool{}
	u := s.url("failed?queue=a")
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("pagination does not end")
		}
		r := s.get(u)
		ids := rowIDs(r.Doc)
		for _, id := range ids {
			if seen[id] {
				t.Errorf("job %s on two pages", id)
			}
			seen[id] = true
		}
		next := find(r.Doc, byID("next-page"))
		if next == nil {
			if pages != 2 || len(ids) != 5 {
				t.Errorf("last page is page %d with %d rows, want page 2 with 5", pages, len(ids))
			}
			break
		}
		if len(ids) != dashboard.PageSize {
			t.Errorf("page %d has %d rows", pages, len(ids))
		}
		u = resolve(t, u, attr(next, "href"))
		if !strings.Contains(u, "after=") || !strings.Contains(u, "queue=a") {
			t.Errorf("next link %s lacks the cursor or the filter", u)
		}
	}
	if len(seen) != len(a) {
		t.Errorf("paged through %d jobs of queue a, want %d", len(seen), len(a))
	}
	for _, f := range []string{"failed?tag=vip", "failed?q=findme", "failed?queue=b&name=SendEmail"} {
		if got := rowIDs(s.page(f).Doc); len(got) != len(b) {
			t.Errorf("%s: %d rows, want %d", f, len(got), len(b))
		}
	}
	if got := rowIDs(s.page("failed?name=Other").Doc); len(got) != 0 {
		t.Errorf("name filter: %d rows, want 0", len(got))
	}
	// Jobs by state.
	if err := queue.Dispatch(context.Background(), q, struct{}{}, queue.OnQueue("c")); err != nil {
		t.Fatal(err)
	}
	if got := rowIDs(s.page("jobs?state=ready&queue=c").Doc); len(got) != 1 {
		t.Errorf("ready jobs of c: %d, want 1", len(got))
	}
}

func TestBulkActions(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	a := deadJobs(t, q, "a", 4, `{}`, "x")
	b := deadJobs(t, q, "b", 3, `{}`, "y")
	s := serve(t, dashboard.ForQueue(q))
	ctx := context.Background()

	list := s.page("failed")
	bulk := find(list.Doc, byID("bulk"))
	retrySel := find(list.Doc, byID("retry-selected"))
	r := s.follow(s.submit(s.url("failed"), bulk, retrySel, url.Values{"id": {a[0], a[1]}}))
	if got := rowIDs(r.Doc); len(got) != 5 || slices.Contains(got, a[0]) || slices.Contains(got, a[1]) {
		t.Errorf("after retrying two selected: %v", got)
	}

	r = s.follow(s.confirmMatching("failed?queue=b", "forget-matching", "3 failed job(s) match"))
	if r.Request.URL.Query().Get("queue") != "b" {
		t.Errorf("bulk action returned to %s, want the filtered list", r.Request.URL)
	}
	for _, id := range b {
		if _, err := q.GetJob(ctx, id); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("job %s of b not forgotten: %v", id, err)
		}
	}
	if j, _ := q.GetJob(ctx, a[2]); j.State != queue.StateDead {
		t.Errorf("job of queue a touched by the filtered bulk forget: %s", j.State)
	}
}

func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	if err := queue.Dispatch(context.Background(), q, struct{}{}, queue.OnQueue("emails")); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q))
	p := s.page("queue/emails")
	pause := find(p.Doc, func(n *html.Node) bool { return n.Data == "form" && find(n, byID("pause")) != nil })
	if pause == nil {
		t.Fatal("no pause form")
	}
	r := s.follow(s.submit(s.url("queue/emails"), pause, nil, nil))
	if paused, _ := q.Paused(context.Background()); !slices.Equal(paused, []string{"emails"}) {
		t.Errorf("paused = %v", paused)
	}
	resume := find(r.Doc, func(n *html.Node) bool { return n.Data == "form" && find(n, byID("resume")) != nil })
	if resume == nil {
		t.Fatalf("paused queue page has no resume form:\n%s", r.Body)
	}
	s.follow(s.submit(r.Request.URL.String(), resume, nil, nil))
	if paused, _ := q.Paused(context.Background()); len(paused) != 0 {
		t.Errorf("after resume paused = %v", paused)
	}
}

func TestWorkersPage(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	now := time.Now()
	if err := q.Heartbeat(context.Background(), driver.WorkerInfo{ID: "w-1", Host: "box", PID: 42, Queues: []string{"a", "b"}, Concurrency: 8, StartedAt: now, LastSeen: now,
		Running: map[string]int{"a": 2}, Reserved: map[string]int{"a": 1, "b": 1200}}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q))
	r := s.page("workers")
	tds := findAll(find(r.Doc, byID("workers")), byTag("td"))
	var cells []string
	for _, td := range tds[:7] {
		cells = append(cells, text(td))
	}
	if want := []string{"w-1", "box", "42", "a, b", "8", "2", "1,201"}; !slices.Equal(cells, want) {
		t.Errorf("worker row = %q, want %q", cells, want)
	}
	if got, want := attr(tds[5], "title"), "a: 2 running, 1 reserved; b: 1,200 reserved"; got != want {
		t.Errorf("held jobs title = %q, want %q", got, want)
	}
	for stat, want := range map[string]string{"held-running": "2", "held-reserved": "1,201"} {
		if n := find(r.Doc, func(n *html.Node) bool { return attr(n, "data-stat") == stat }); n == nil || text(n) != want {
			t.Errorf("workers card %s = %v, want %s", stat, n, want)
		}
	}
}

func TestPartialRefreshRendersOnlyTheLiveRegion(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	deadJobs(t, q, "a", 2, `{}`, "x")
	s := serve(t, dashboard.ForQueue(q))
	req, _ := http.NewRequest(http.MethodGet, s.url("failed"), nil)
	req.Header.Set("X-Meridian-Partial", "1")
	r := s.do(req)
	if r.StatusCode != 200 {
		t.Fatalf("partial: %d", r.StatusCode)
	}
	nodes, err := html.ParseFragment(strings.NewReader(r.Body), &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div})
	if err != nil {
		t.Fatal(err)
	}
	root := &html.Node{Type: html.ElementNode, Data: "div"}
	for _, n := range nodes {
		root.AppendChild(n)
	}
	if find(root, byTag("nav")) != nil && find(root, byTag("form")) != nil && find(root, byID("bulk")) != nil {
		t.Error("the partial holds the page chrome")
	}
	if find(root, byTag("title")) != nil || find(root, byID("live")) != nil {
		t.Error("the partial holds the layout")
	}
	if len(rowIDs(root)) != 2 {
		t.Errorf("the partial holds %d rows, want 2", len(rowIDs(root)))
	}
}

func TestErrorsAndOpenRedirects(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 1, `{}`, "x")
	s := serve(t, dashboard.ForQueue(q))
	if r := s.get(s.url("jobs/missing")); r.StatusCode != 404 || !strings.Contains(text(find(r.Doc, byID("message"))), "no job missing") {
		t.Errorf("missing job: %d", r.StatusCode)
	}
	if r := s.get(s.url("nowhere")); r.StatusCode != 404 {
		t.Errorf("unknown page: %d", r.StatusCode)
	}
	list := s.page("failed")
	form := formWithAction(list.Doc, "failed/"+ids[0]+"/retry")
	for _, ret := range []string{"//evil.example/x", "https://evil.example/", "/elsewhere", "%2e%2e/%2e%2e/x", "../x"} {
		r := s.submit(s.url("failed"), form, nil, url.Values{"return": {ret}})
		loc := r.Header.Get("Location")
		if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "../../failed?") {
			t.Errorf("return=%s: %d to %q, want the failed list", ret, r.StatusCode, loc)
		}
	}
}

func TestQueueInspectorPageNumbers(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ctx := context.Background()
	for range dashboard.PageSize + 10 {
		if err := queue.Dispatch(ctx, q, struct{}{}, queue.OnQueue("a")); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if err := queue.Dispatch(ctx, q, struct{}{}, queue.Delay(time.Hour), queue.OnQueue("a")); err != nil {
			t.Fatal(err)
		}
	}
	dead := deadJobs(t, q, "d", 3, `{}`, "x")
	insp := dashboard.ForQueue(q)
	p1, err := insp.Pending("a", 1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := insp.Pending("a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(p1) != dashboard.PageSize || len(p2) != 15 {
		t.Fatalf("pending pages of %d and %d, want %d and 15 (ready then scheduled)", len(p1), len(p2), dashboard.PageSize)
	}
	if p2[14].State != queue.StateScheduled || p1[0].State != queue.StateReady {
		t.Errorf("states: first %s, last %s", p1[0].State, p2[14].State)
	}
	if _, err := insp.Pending("a", 1000); err == nil {
		t.Error("a page past the walk limit did not fail")
	}
	f, err := insp.Failed(1)
	if err != nil || len(f) != 3 {
		t.Fatalf("Failed(1) = %d, %v", len(f), err)
	}
	if err := insp.Retry(dead[0]); err != nil {
		t.Fatal(err)
	}
	if err := insp.Forget(dead[0]); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("Forget of a retried job: %v, want ErrNotFound", err)
	}
	if err := insp.FlushFailed(); err != nil {
		t.Fatal(err)
	}
	sv, err := insp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if sv.Totals.Dead.N != 0 || sv.Totals.Pending != int64(dashboard.PageSize+10+5+1) {
		t.Errorf("totals: dead %v, pending %d", sv.Totals.Dead, sv.Totals.Pending)
	}
}

// plainQueue hides every optional ability of the queue it wraps.
type plainQueue struct{ queue.Queue }

func TestDriverWithoutInspection(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 2, `{}`, "x")
	if err := queue.Dispatch(context.Background(), q, struct{}{}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(plainQueue{q}))
	ov := s.page("")
	if got := text(find(ov.Doc, func(n *html.Node) bool { return attr(n, "data-stat") == "pending" })); got != "1" {
		t.Errorf("pending = %q, want 1 from Len", got)
	}
	if find(ov.Doc, byTag("svg")) != nil {
		t.Error("charts without metrics")
	}
	list := s.page("failed")
	if got := rowIDs(list.Doc); len(got) != 2 {
		t.Fatalf("failed list from DeadLetters: %v", got)
	}
	after := s.follow(s.submit(s.url("failed"), formWithAction(list.Doc, "failed/"+ids[0]+"/retry"), nil, nil))
	if got := rowIDs(after.Doc); len(got) != 1 || got[0] != ids[1] {
		t.Errorf("after retry: %v", got)
	}
	for _, p := range []string{"jobs?state=ready", "jobs/" + ids[1], "workers", "api/metrics"} {
		if r := s.get(s.url(p)); r.StatusCode != http.StatusNotFound {
			t.Errorf("%s without the ability: %d, want 404", p, r.StatusCode)
		}
	}
	if a := find(s.page("failed").Doc, func(n *html.Node) bool { return n.Data == "a" && strings.Contains(attr(n, "href"), "jobs") }); a != nil {
		t.Errorf("link to a page the driver cannot serve: %s", attr(a, "href"))
	}
}

// countingQueue counts QueueStats calls and holds each until released.
type countingQueue struct {
	*memqueue.Queue
	calls   atomic.Int32
	release chan struct{}
}

func (c *countingQueue) QueueStats(ctx context.Context) ([]driver.QueueStats, error) {
	c.calls.Add(1)
	<-c.release
	return c.Queue.QueueStats(ctx)
}

// However many pages are open, the store answers one QueueStats per short
// interval; an action makes the next page read afresh.
func TestFiguresAreSharedBetweenRequests(t *testing.T) {
	t.Parallel()
	q := &countingQueue{Queue: memqueue.New(), release: make(chan struct{})}
	ids := deadJobs(t, q.Queue, "emails", 1, `{}`, "x")
	s := serve(t, dashboard.ForQueue(q))
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if r := s.get(s.url("api/stats")); r.StatusCode != 200 {
				t.Errorf("api/stats: %d", r.StatusCode)
			}
		})
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return q.calls.Load() > 0 }, "no request reached the store")
	close(q.release)
	wg.Wait()
	if n := q.calls.Load(); n != 1 {
		t.Errorf("10 concurrent reads made %d QueueStats calls, want 1", n)
	}
	list := s.page("failed")
	s.follow(s.submit(s.url("failed"), formWithAction(list.Doc, "failed/"+ids[0]+"/retry"), nil, nil))
	var sv dashboard.StatsView
	if err := json.Unmarshal([]byte(s.page("api/stats").Body), &sv); err != nil {
		t.Fatal(err)
	}
	if n := q.calls.Load(); n != 2 || sv.Totals.Dead.N != 0 || sv.Totals.Ready.N != 1 {
		t.Errorf("after a retry: %d calls, dead %v, ready %v; want a fresh read showing the job ready", n, sv.Totals.Dead, sv.Totals.Ready)
	}
}

// Unknown addresses get the dashboard's own 404 page (or a JSON error
// under api/), an unknown state= a 400, and a known path asked with the
// wrong method still a 405.
func TestUnknownAddressesAndStates(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 1, `{}`, "x")
	s := serve(t, dashboard.ForQueue(q))

	r := s.get(s.url("no/such/page"))
	if r.StatusCode != http.StatusNotFound || r.Doc == nil || find(r.Doc, byID("message")) == nil ||
		find(r.Doc, func(n *html.Node) bool { return n.Data == "nav" && strings.Contains(attr(n, "class"), "sidebar") }) == nil {
		t.Errorf("unknown page: %d, want the styled 404 with the sidebar:\n%s", r.StatusCode, r.Body)
	}
	r = s.get(s.url("api/nope"))
	if r.StatusCode != http.StatusNotFound || r.Header.Get("Content-Type") != "application/json" || !strings.Contains(r.Body, `"error"`) {
		t.Errorf("unknown api endpoint: %d %q %s, want a JSON 404", r.StatusCode, r.Header.Get("Content-Type"), r.Body)
	}
	r = s.get(s.url("jobs?state=bogus"))
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(text(find(r.Doc, byID("message"))), `"bogus"`) {
		t.Errorf("unknown state: %d, want 400 naming it:\n%s", r.StatusCode, r.Body)
	}
	for _, st := range []string{"", "ready", "scheduled", "running", "dead", "failed", "done"} {
		if r := s.get(s.url("jobs?state=" + st)); r.StatusCode != http.StatusOK {
			t.Errorf("state=%s: %d, want 200", st, r.StatusCode)
		}
	}
	if r := s.get(s.url("failed/" + ids[0] + "/forget")); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET on forget = %d, want 405", r.StatusCode)
	}
}
