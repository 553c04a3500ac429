package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// The tests' tokens: one that may act, one that may only read.
const (
	actToken  = "ops-token"
	readToken = "viewer-token"
)

// tokens is the BearerTokens hook of the tests.
func tokens(_ context.Context, tok string) (dashboard.Identity, bool) {
	switch tok {
	case actToken:
		return dashboard.Identity{Name: "deploy-bot", Act: true}, true
	case readToken:
		return dashboard.Identity{Name: "grafana"}, true
	}
	return dashboard.Identity{}, false
}

// apiCall sends method rel with a JSON body (nil for none) and the bearer
// token (none when ""), as a script would: no cookie, no Origin.
func (s *site) apiCall(method, rel, token string, body any) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, _ := http.NewRequest(method, s.url("api/"+rel), rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.t.Fatalf("%s %s: %d with Content-Type %q, want JSON:\n%s", method, rel, res.StatusCode, ct, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		s.t.Fatalf("%s %s: %d, not a JSON object: %v\n%s", method, rel, res.StatusCode, err, b)
	}
	return res.StatusCode, m
}

// jobState is the state field of an action's job.
func jobState(m map[string]any) string {
	j, _ := m["job"].(map[string]any)
	s, _ := j["state"].(string)
	return s
}

// doneJob pushes a job to qname and acks it.
func doneJob(t *testing.T, q queue.Queue, qname string) string {
	t.Helper()
	ctx := context.Background()
	j, _ := queue.NewJob(struct{}{}, queue.OnQueue(qname))
	if err := q.Push(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := q.Reserve(ctx, []string{qname}, 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("reserve: %v, %d jobs", err, len(got))
	}
	if err := testutil.Ack(ctx, q, got[0].Lease()); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// readyJob pushes a job to qname.
func readyJob(t *testing.T, q queue.Queue, qname string) string {
	t.Helper()
	j, _ := queue.NewJob(struct{}{}, queue.OnQueue(qname))
	if err := q.Push(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// Each job action through the API: its first call changes the job, a
// repeat answers with the job as it is, and a job the action cannot apply
// to is a 409 carrying the job.
func TestAPIJobActions(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		open func(*testing.T) queue.Queue
	}{
		{"memqueue", func(*testing.T) queue.Queue { return memqueue.New() }},
		{"sqlite", func(t *testing.T) queue.Queue {
			// Retention keeps the done job the 409 and the retry need.
			q, err := queue.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "jobs.db")+"?retention=1h")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.(io.Closer).Close() })
			return q
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			q := st.open(t)
			s := serve(t, dashboard.ForQueue(q), dashboard.BearerTokens(tokens))
			dead := deadJobs(t, q, "emails", 2, `{"to":"a"}`, "smtp down")
			done := doneJob(t, q, "emails")
			ready := readyJob(t, q, "emails")

			steps := []struct {
				what, rel   string
				status      int
				changed     bool
				state, was  string
				errContains string
			}{
				{"retry a dead job", "jobs/" + dead[0] + "/retry", 200, true, "ready", "dead", ""},
				{"retry it again", "jobs/" + dead[0] + "/retry", 200, false, "ready", "", ""},
				{"retry an unknown job", "jobs/nope/retry", 404, false, "", "", "not found"},
				{"forget a dead job", "jobs/" + dead[1] + "/forget", 200, true, "", "", ""},
				{"forget it again", "jobs/" + dead[1] + "/forget", 404, false, "", "", "not found"},
				{"forget a ready job", "jobs/" + ready + "/forget", 409, false, "ready", "", "only failed jobs"},
				{"cancel a ready job", "jobs/" + ready + "/cancel", 200, true, "cancelled", "ready", ""},
				{"cancel it again", "jobs/" + ready + "/cancel", 200, false, "cancelled", "", ""},
				{"cancel a done job", "jobs/" + done + "/cancel", 409, false, "done", "", "finished"},
				{"cancel an unknown job", "jobs/nope/cancel", 404, false, "", "", "not found"},
				// A kept done or cancelled job runs again under its ID.
				{"retry a done job", "jobs/" + done + "/retry", 200, true, "ready", "done", ""},
				{"retry a cancelled job", "jobs/" + ready + "/retry", 200, true, "ready", "cancelled", ""},
				{"retry a ready job", "jobs/" + ready + "/retry", 200, false, "ready", "", ""},
				{"run a ready job now", "jobs/" + ready + "/run-now", 200, false, "ready", "", ""},
				{"run an unknown job now", "jobs/nope/run-now", 404, false, "", "", "not found"},
			}
			for _, step := range steps {
				code, m := s.apiCall(http.MethodPost, step.rel, actToken, nil)
				if code != step.status {
					t.Fatalf("%s: %d, want %d: %v", step.what, code, step.status, m)
				}
				if step.errContains != "" {
					if e, _ := m["error"].(string); !strings.Contains(e, step.errContains) {
						t.Errorf("%s: error %q, want it to say %q", step.what, e, step.errContains)
					}
				}
				if code == 404 {
					continue
				}
				if m["changed"] != step.changed {
					t.Errorf("%s: changed = %v, want %v", step.what, m["changed"], step.changed)
				}
				if got := jobState(m); got != step.state {
					t.Errorf("%s: job state %q, want %q (%v)", step.what, got, step.state, m)
				}
				if was, _ := m["was"].(string); was != step.was {
					t.Errorf("%s: was = %q, want %q", step.what, was, step.was)
				}
			}
			if code, m := s.apiCall(http.MethodGet, "jobs/"+dead[1], actToken, nil); code != 404 {
				t.Errorf("the forgotten job is still there: %d %v", code, m)
			}
		})
	}
}

// Flush, pause and resume through the API, read back through api/stats.
func TestAPIQueueActions(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	s := serve(t, dashboard.ForQueue(q), dashboard.BearerTokens(tokens))
	deadJobs(t, q, "emails", 2, "x", "boom")
	deadJobs(t, q, "sms", 3, "x", "boom")

	paused := func(name string) bool {
		t.Helper()
		_, m := s.apiCall(http.MethodGet, "stats", actToken, nil)
		qs, _ := m["queues"].([]any)
		for _, v := range qs {
			if qm := v.(map[string]any); qm["queue"] == name {
				return qm["paused"] == true
			}
		}
		t.Fatalf("api/stats has no queue %s: %v", name, m)
		return false
	}
	for range 2 { // pausing a paused queue answers the same
		code, m := s.apiCall(http.MethodPost, "queues/emails/pause", actToken, nil)
		if code != 200 || m["paused"] != true || m["queue"] != "emails" {
			t.Fatalf("pause: %d %v", code, m)
		}
	}
	if !paused("emails") || paused("sms") {
		t.Fatal("after pausing emails, api/stats does not show emails alone paused")
	}
	if code, m := s.apiCall(http.MethodPost, "queues/emails/resume", actToken, nil); code != 200 || m["paused"] != false {
		t.Fatalf("resume: %d %v", code, m)
	}
	if paused("emails") {
		t.Fatal("emails still paused after resume")
	}

	flushes := []struct {
		body    any
		status  int
		flushed float64
	}{
		{map[string]string{"queue": "emails"}, 200, 2},
		{map[string]string{"queue": "emails"}, 200, 0},
		{`{"queue": 7}`, 400, 0},
		{`{"queues": "sms"}`, 400, 0},
		{nil, 200, 3},
	}
	for _, f := range flushes {
		code, m := s.apiCall(http.MethodPost, "failed/flush", actToken, f.body)
		if code != f.status {
			t.Fatalf("flush %v: %d, want %d: %v", f.body, code, f.status, m)
		}
		if code == 200 && m["flushed"] != f.flushed {
			t.Errorf("flush %v: flushed = %v, want %v", f.body, m["flushed"], f.flushed)
		}
	}
	if _, m := s.apiCall(http.MethodGet, "jobs?state=dead", actToken, nil); len(m["jobs"].([]any)) != 0 {
		t.Errorf("dead jobs left after flushing every queue: %v", m["jobs"])
	}
}

// Bulk actions: listed ids, and every matching job with the dry run's
// count first, on a store with set-based bulk actions (SQLite) and one
// without a count (an InspectorSource is not one; memqueue is).
func TestAPIBulk(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		open func(*testing.T) queue.Queue
	}{
		{"memqueue", func(*testing.T) queue.Queue { return memqueue.New() }},
		{"sqlite", openSQLite},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			q := st.open(t)
			s := serve(t, dashboard.ForQueue(q), dashboard.BearerTokens(tokens))
			vip := deadJobs(t, q, "emails", 3, `{"plan":"vip"}`, "boom")
			deadJobs(t, q, "emails", 4, `{"plan":"free"}`, "boom")
			var waiting []string
			for range 3 {
				waiting = append(waiting, readyJob(t, q, "sms"))
			}

			bad := []struct {
				body any
				want int
			}{
				{map[string]any{"action": "explode", "ids": vip}, 400},
				{map[string]any{"action": "retry"}, 400},
				{map[string]any{"action": "retry", "ids": vip, "match": map[string]any{}}, 400},
				{map[string]any{"action": "retry", "ids": vip, "dry_run": true}, 400},
				{map[string]any{"action": "cancel", "match": map[string]any{"state": "dead"}}, 400},
				{map[string]any{"action": "retry", "match": map[string]any{"state": "ready"}}, 400},
				{map[string]any{"action": "retry", "match": map[string]any{"queue": "emails", "colour": "red"}}, 400},
				{`not json`, 400},
			}
			for _, b := range bad {
				if code, m := s.apiCall(http.MethodPost, "jobs/bulk", actToken, b.body); code != b.want {
					t.Errorf("bulk %v: %d, want %d: %v", b.body, code, b.want, m)
				}
			}

			// The confirmation's count, then the action, then nothing left.
			match := map[string]any{"queue": "emails", "q": "vip"}
			code, m := s.apiCall(http.MethodPost, "jobs/bulk", actToken, map[string]any{"action": "retry", "match": match, "dry_run": true})
			if code != 200 || m["dry_run"] != true || m["changed"] != 0.0 {
				t.Fatalf("dry run: %d %v", code, m)
			}
			if c, _ := m["matching"].(map[string]any); c["n"] != 3.0 {
				t.Errorf("dry run counted %v, want 3", m["matching"])
			}
			code, m = s.apiCall(http.MethodPost, "jobs/bulk", actToken, map[string]any{"action": "retry", "match": match})
			if code != 200 || m["changed"] != 3.0 || m["more"] != false {
				t.Fatalf("retry matching: %d %v", code, m)
			}
			code, m = s.apiCall(http.MethodPost, "jobs/bulk", actToken, map[string]any{"action": "retry", "match": match})
			if code != 200 || m["changed"] != 0.0 {
				t.Fatalf("retry matching again: %d %v", code, m)
			}
			for _, id := range vip {
				_, j := s.apiCall(http.MethodGet, "jobs/"+id, actToken, nil)
				if j["state"] != "ready" {
					t.Errorf("job %s is %v after the bulk retry, want ready", id, j["state"])
				}
				if got := actionsOf(j); len(got) != 1 || got[0] != "deploy-bot: retried (was dead) with others in one bulk retry" {
					t.Errorf("job %s's history after the bulk retry: %q", id, got)
				}
			}

			// Retry listed ids: each recorded, as one retry.
			listed := deadJobs(t, q, "listed", 2, `{"plan":"listed"}`, "boom")
			code, m = s.apiCall(http.MethodPost, "jobs/bulk", actToken, map[string]any{"action": "retry", "ids": append(listed, "nope")})
			if code != 200 || m["changed"] != 2.0 {
				t.Fatalf("retry ids: %d %v", code, m)
			}
			for _, id := range listed {
				if got := actionsOf(s.apiJobOf(id)); len(got) != 1 || got[0] != "deploy-bot: retried (was dead)" {
					t.Errorf("job %s's history after a retry by ids: %q", id, got)
				}
			}

			// Forget every failed job of the queue.
			code, m = s.apiCall(http.MethodPost, "jobs/bulk", actToken, map[string]any{"action": "forget", "match": map[string]any{"state": "failed", "queue": "emails"}})
			if code != 200 || m["changed"] != 4.0 {
				t.Fatalf("forget matching: %d %v", code, m)
			}

			// Cancel listed ids: an unknown one and a repeat are skipped.
			ids := append(slices.Clone(waiting[:2]), "nope", waiting[0])
			code, m = s.apiCall(http.MethodPost, "jobs/bulk", actToken, map[string]any{"action": "cancel", "ids": ids})
			if code != 200 || m["changed"] != 2.0 {
				t.Fatalf("cancel ids: %d %v", code, m)
			}
			code, m = s.apiCall(http.MethodPost, "jobs/bulk", actToken, map[string]any{"action": "cancel", "match": map[string]any{"state": "ready", "queue": "sms"}})
			if code != 200 || m["changed"] != 1.0 {
				t.Fatalf("cancel matching: %d %v", code, m)
			}
		})
	}
}

// A Source without job detail or bulk abilities (the cookbook's
// in-process wiring) still retries, forgets and flushes through the API.
func TestAPIActionsInMemoryInspector(t *testing.T) {
	t.Parallel()
	stats := dashboard.NewStats()
	var mu sync.Mutex
	var requeued []string
	failed := dashboard.NewMemoryFailedJobs(func(_ context.Context, j queue.Job) error {
		mu.Lock()
		defer mu.Unlock()
		requeued = append(requeued, j.ID)
		return nil
	})
	var ids []string
	for range 3 {
		j, _ := queue.NewJob(struct{}{}, queue.OnQueue("emails"))
		failed.Record(j, "emails", nil)
		ids = append(ids, j.ID)
	}
	s := serve(t, dashboard.NewInspector(stats, failed), dashboard.BearerTokens(tokens))
	if code, m := s.apiCall(http.MethodPost, "jobs/"+ids[0]+"/retry", actToken, nil); code != 200 || m["changed"] != true {
		t.Fatalf("retry: %d %v", code, m)
	}
	if code, m := s.apiCall(http.MethodPost, "jobs/"+ids[0]+"/retry", actToken, nil); code != 404 {
		t.Fatalf("retry of a record that is gone: %d %v, want 404", code, m)
	}
	if code, m := s.apiCall(http.MethodPost, "jobs/"+ids[1]+"/forget", actToken, nil); code != 200 || m["changed"] != true {
		t.Fatalf("forget: %d %v", code, m)
	}
	if code, m := s.apiCall(http.MethodPost, "jobs/bulk", actToken, map[string]any{"action": "retry", "match": map[string]any{}}); code != 404 {
		t.Errorf("bulk on every match without Browse: %d %v, want 404", code, m)
	}
	if code, m := s.apiCall(http.MethodPost, "failed/flush", actToken, nil); code != 200 || m["flushed"] != nil {
		t.Fatalf("flush: %d %v, want 200 with flushed null", code, m)
	}
	if failed.Len() != 0 {
		t.Errorf("%d records left after flush", failed.Len())
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(requeued, ids[:1]) {
		t.Errorf("requeued %v, want %v", requeued, ids[:1])
	}
}

// Bearer tokens: the hook decides, a token skips the cookie checks, a
// refused or unconfigured token is a JSON 401, and cookie sessions still
// need the double-submit token.
func TestAPIBearerAuth(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	refuseAll := dashboard.Authorize(func(*http.Request) (bool, bool) { return false, false })
	withHook := serve(t, dashboard.ForQueue(q), dashboard.BearerTokens(tokens), refuseAll)
	noHook := serve(t, dashboard.ForQueue(q))
	local := serve(t, dashboard.ForQueue(q), dashboard.BearerTokens(tokens))

	cases := []struct {
		what          string
		s             *site
		method, rel   string
		token         string
		status        int
		errorContains string
	}{
		{"acting token, POST", withHook, "POST", "queues/emails/pause", actToken, 200, ""},
		{"acting token, GET", withHook, "GET", "stats", actToken, 200, ""},
		{"reading token, GET", withHook, "GET", "stats", readToken, 200, ""},
		{"reading token, POST", withHook, "POST", "queues/emails/pause", readToken, 403, "not act"},
		{"unknown token", withHook, "GET", "stats", "guess", 401, "refused"},
		{"no token, Authorize refuses", withHook, "GET", "stats", "", 403, "Authorize"},
		{"no hook", noHook, "GET", "stats", actToken, 401, "BearerTokens"},
		{"no hook, POST", noHook, "POST", "queues/emails/pause", actToken, 401, "BearerTokens"},
		{"local, no token, POST without CSRF", local, "POST", "queues/emails/pause", "", 403, "token"},
		{"local, token, POST", local, "POST", "queues/emails/resume", actToken, 200, ""},
	}
	for _, c := range cases {
		code, m := c.s.apiCall(c.method, c.rel, c.token, nil)
		if code != c.status {
			t.Errorf("%s: %d, want %d: %v", c.what, code, c.status, m)
			continue
		}
		if e, _ := m["error"].(string); c.errorContains != "" && !strings.Contains(e, c.errorContains) {
			t.Errorf("%s: error %q, want it to say %q", c.what, e, c.errorContains)
		}
	}

	// A 401 says how to authenticate.
	req, _ := http.NewRequest(http.MethodGet, withHook.url("api/stats"), nil)
	req.Header.Set("Authorization", "Bearer guess")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("401 WWW-Authenticate = %q, want the Bearer scheme", got)
	}

	// A token skips the cross-origin check too: a browser never sends one
	// by itself.
	req, _ = http.NewRequest(http.MethodPost, local.url("api/queues/emails/pause"), nil)
	req.Header.Set("Authorization", "Bearer "+actToken)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	if r := local.do(req); r.StatusCode != 200 {
		t.Errorf("bearer POST marked cross-site: %d, want 200\n%s", r.StatusCode, r.Body)
	}

	// A cookie session: a cross-site POST is refused, a same-origin one
	// with the double-submit token passes.
	local.page("")
	var csrf string
	for _, c := range local.c.Jar.Cookies(req.URL) {
		if c.Name == "meridian_csrf" {
			csrf = c.Value
		}
	}
	if csrf == "" {
		t.Fatal("the overview set no meridian_csrf cookie")
	}
	post := func(site string, token string) int {
		req, _ := http.NewRequest(http.MethodPost, local.url("api/queues/emails/resume"), nil)
		req.Header.Set("Sec-Fetch-Site", site)
		if token != "" {
			req.Header.Set("X-Csrf-Token", token)
		}
		return local.do(req).StatusCode
	}
	if got := post("cross-site", csrf); got != 403 {
		t.Errorf("cookie session, cross-site POST: %d, want 403", got)
	}
	if got := post("same-origin", ""); got != 403 {
		t.Errorf("cookie session, POST without the token: %d, want 403", got)
	}
	if got := post("same-origin", csrf); got != 200 {
		t.Errorf("cookie session, same-origin POST with the token: %d, want 200", got)
	}
}

// identitySource notes who each retry came from, as a Source recording
// a job's history would.
type identitySource struct {
	dashboard.Source
	mu  sync.Mutex
	who []dashboard.Identity
}

func (r *identitySource) RetryJob(ctx context.Context, id string) error {
	if who, ok := dashboard.IdentityOf(ctx); ok {
		r.mu.Lock()
		r.who = append(r.who, who)
		r.mu.Unlock()
	}
	return r.Source.RetryJob(ctx, id)
}

// Who acts reaches the Source through the context, and the handler logs
// every action with it: the bearer token's holder, or the cookie
// session's user as Identify names it.
func TestAPIActionIdentity(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	src := &identitySource{Source: dashboard.ForQueue(q)}
	var logBuf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logBuf, nil))
	s := serve(t, src, dashboard.BearerTokens(tokens), dashboard.Logger(logger),
		dashboard.Authorize(func(*http.Request) (bool, bool) { return true, true }),
		dashboard.Identify(func(r *http.Request) string { return "alice" }))
	ids := deadJobs(t, q, "emails", 2, "x", "boom")

	if code, m := s.apiCall(http.MethodPost, "jobs/"+ids[0]+"/retry", actToken, nil); code != 200 {
		t.Fatalf("bearer retry: %d %v", code, m)
	}
	// Alice retries from the failed page's form.
	list := s.page("failed")
	f := formWithAction(list.Doc, "failed/"+ids[1]+"/retry")
	if f == nil {
		t.Fatalf("no retry form for %s", ids[1])
	}
	if r := s.submit(s.url("failed"), f, nil, nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("form retry: %d\n%s", r.StatusCode, r.Body)
	}

	src.mu.Lock()
	got := slices.Clone(src.who)
	src.mu.Unlock()
	want := []dashboard.Identity{{Name: "deploy-bot", Act: true, Bearer: true}, {Name: "alice", Act: true}}
	if !slices.Equal(got, want) {
		t.Errorf("the Source saw %+v, want %+v", got, want)
	}

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logBuf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "dashboard: action" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("logged %d actions, want 2:\n%s", len(lines), logBuf.String())
	}
	if l := lines[0]; l["by"] != "deploy-bot" || l["bearer"] != true || l["job"] != ids[0] || l["changed"] != true || l["status"] != 200.0 {
		t.Errorf("the bearer retry's log line: %v", l)
	}
	if l := lines[1]; l["by"] != "alice" || l["bearer"] != false || l["status"] != 303.0 {
		t.Errorf("the form retry's log line: %v", l)
	}
}

// syncBuffer is a bytes.Buffer safe for the handler's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Unknown paths under api/ are a JSON 404 whatever the method, before
// any form-token check; a known path asked with the wrong method a JSON
// 405 naming the methods it takes.
func TestAPIUnknownPaths(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.ForQueue(memqueue.New()))
	for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		for _, rel := range []string{"nope", "jobs/x/explode", "queues/emails", "failed/flush/now"} {
			code, m := s.apiCall(method, rel, "", nil)
			if code != 404 || m["error"] != "no such endpoint" {
				t.Errorf("%s api/%s: %d %v, want a JSON 404", method, rel, code, m)
			}
		}
	}
	// A misspelt filter is refused, not ignored (which would list every
	// job).
	for _, rel := range []string{"jobs?state=dead&search=vip", "jobs?State=dead"} {
		code, m := s.apiCall("GET", rel, "", nil)
		if e, _ := m["error"].(string); code != 400 || !strings.Contains(e, "unknown query parameter") {
			t.Errorf("GET api/%s: %d %v, want a 400 naming the parameter", rel, code, m)
		}
	}
	if code, m := s.apiCall("GET", "jobs?state=dead&queue=a&name=b&tag=c&q=d&limit=5", "", nil); code != 200 {
		t.Errorf("GET api/jobs with every filter: %d %v", code, m)
	}
	wrong := []struct{ method, rel, allow string }{
		{"DELETE", "stats", "GET, HEAD"},
		{"POST", "stats", "GET, HEAD"},
		{"GET", "failed/flush", "POST"},
		{"PUT", "jobs/bulk", "GET, HEAD, POST"}, // jobs/{id} reads, jobs/bulk acts
	}
	for _, c := range wrong {
		req, _ := http.NewRequest(c.method, s.url("api/"+c.rel), nil)
		r := s.do(req)
		if r.StatusCode != 405 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") || r.Header.Get("Allow") != c.allow {
			t.Errorf("%s api/%s: %d %q Allow %q, want a JSON 405 allowing %q\n%s", c.method, c.rel, r.StatusCode,
				r.Header.Get("Content-Type"), r.Header.Get("Allow"), c.allow, r.Body)
		}
	}
}

// The OpenAPI document and the router agree: every API route is
// documented, and every documented operation is routed.
func TestAPIOpenAPIMatchesRouter(t *testing.T) {
	t.Parallel()
	h := dashboard.Handler(dashboard.ForQueue(memqueue.New()))
	routed := map[string]bool{}
	for _, p := range dashboard.RoutePatterns(h) {
		method, path, _ := strings.Cut(p, " ")
		if rest, ok := strings.CutPrefix(path, "/queues/api/"); ok {
			routed[method+" /"+rest] = true
		}
	}
	if len(routed) < 20 {
		t.Fatalf("only %d API routes found: %v", len(routed), routed)
	}

	s := serve(t, dashboard.ForQueue(memqueue.New()))
	code, doc := s.apiCall(http.MethodGet, "openapi.json", "", nil)
	if code != 200 {
		t.Fatalf("GET api/openapi.json: %d", code)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("openapi = %v, want a 3.x document", doc["openapi"])
	}
	documented := map[string]bool{}
	paths, _ := doc["paths"].(map[string]any)
	for path, ops := range paths {
		for method := range ops.(map[string]any) {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	for op := range routed {
		if !documented[op] {
			t.Errorf("the router serves %s, which the OpenAPI document lacks", op)
		}
	}
	for op := range documented {
		if !routed[op] {
			t.Errorf("the OpenAPI document has %s, which the router lacks", op)
		}
	}
	// Every $ref points at a component the document has.
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
				var at any = doc
				for _, p := range parts {
					m, _ := at.(map[string]any)
					at = m[p]
				}
				if at == nil {
					t.Errorf("$ref %s resolves to nothing", ref)
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
}
