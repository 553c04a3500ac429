package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// inspectQueue is a queue that lists its jobs.
type inspectQueue interface {
	queue.Queue
	driver.Inspector
}

// scanBound is a queue whose payload searches examine at most scan jobs
// per call, as the SQL drivers' do at 10,000 (or fewer, when their time
// runs out), so a test can reach the bound with a few jobs.
type scanBound struct {
	inspectQueue
	scan int
}

func (s scanBound) ListJobs(ctx context.Context, f driver.JobFilter) (driver.JobPage, error) {
	f.Scan = s.scan
	return s.inspectQueue.ListJobs(ctx, f)
}

// TestSearchSaysWhereItStopped: a bounded search that finds nothing says
// "none among the N" and links to the next N, rather than "no jobs match",
// and following the links reaches every match: on memqueue, on SQLite,
// whose search reads a window of keys, then the matches, and on Redis,
// whose search runs a chunk at a time on the server.
func TestSearchSaysWhereItStopped(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) queue.Queue{
		"memqueue": func(*testing.T) queue.Queue { return memqueue.New() },
		"sqlite":   openSQLite,
		"redis":    openRedisOne,
	} {
		t.Run(name, func(t *testing.T) { testSearchSaysWhereItStopped(t, open(t)) })
	}
}

func testSearchSaysWhereItStopped(t *testing.T, q queue.Queue) {
	// The first failed holds the needle: the failed list is newest first,
	// so it is the 26th, beyond two bounded searches.
	needle := deadJobs(t, q, "mail", 1, `{"to":"needle"}`, "boom")[0]
	deadJobs(t, q, "mail", 25, `{"to":"someone"}`, "boom")
	// SearchBudget(0): each page asks the store once, as the pages did
	// before the search went on by itself (TestSearchFindsADeepMatch).
	s := serve(t, dashboard.ForQueue(scanBound{q.(inspectQueue), 10}), dashboard.SearchBudget(0))

	type step struct {
		rows      []string
		empty     string // text the empty-list message must hold, "" for rows
		hint      bool   // the "looked through" hint under the rows
		continues bool   // a "search the next" link
	}
	steps := []step{
		{empty: "among the 10 most recent", continues: true},
		{empty: "among the next 10", continues: true},
		{rows: []string{needle}},
	}
	u := s.url("failed?q=needle")
	for i, st := range steps {
		r := s.get(u)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("step %d: GET %s: %d", i+1, u, r.StatusCode)
		}
		doc := r.Doc
		if got := rowIDs(doc); strings.Join(got, ",") != strings.Join(st.rows, ",") {
			t.Fatalf("step %d: rows %v, want %v", i+1, got, st.rows)
		}
		if st.empty != "" {
			msg := text(find(doc, byID("no-jobs")))
			if !strings.Contains(msg, st.empty) || strings.Contains(msg, "No failed jobs match the filter") {
				t.Fatalf("step %d: empty message %q, want it to say %q", i+1, msg, st.empty)
			}
		}
		if got := find(doc, byID("search-bounded")) != nil; got != st.hint {
			t.Fatalf("step %d: bounded-search hint shown %v, want %v", i+1, got, st.hint)
		}
		next := find(doc, byID("search-next"))
		if (next != nil) != st.continues {
			t.Fatalf("step %d: search-next link present %v, want %v", i+1, next != nil, st.continues)
		}
		if next != nil {
			if !strings.Contains(text(next), "10") {
				t.Errorf("step %d: link %q does not say how many it searches", i+1, text(next))
			}
			u = resolve(t, u, attr(next, "href"))
		}
	}

	// The JSON API says the same.
	var page struct {
		Jobs    []struct{ ID string } `json:"jobs"`
		Next    string                `json:"next"`
		Scanned int                   `json:"scanned"`
	}
	if err := json.Unmarshal([]byte(s.page("api/jobs?state=dead&q=needle").Body), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 0 || page.Scanned != 10 || page.Next == "" {
		t.Fatalf("api/jobs search = %+v, want no jobs, scanned 10 and a next cursor", page)
	}
}

// TestJobIDBox: the sidebar's job-ID box goes straight to the job.
func TestJobIDBox(t *testing.T) {
	q := memqueue.New()
	id := deadJobs(t, q, "mail", 1, `{}`, "boom")[0]
	s := serve(t, dashboard.ForQueue(q))
	doc := s.page("").Doc
	f := formWithAction(doc, "jobs")
	if f == nil || find(f, byID("find-job-id")) == nil {
		t.Fatal("the overview has no job-ID box")
	}
	r := s.get(s.url("jobs?id=+" + id + "+"))
	got := s.follow(r)
	if got.StatusCode != http.StatusOK || !strings.Contains(got.Request.URL.Path, "/jobs/"+id) {
		t.Fatalf("job-ID box led to %s (%d), want the job's page", got.Request.URL, got.StatusCode)
	}
	// An unknown ID lands on the job page's "not found".
	r = s.follow(s.get(s.url("jobs?id=nope")))
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("job-ID box with an unknown ID: %d, want 404", r.StatusCode)
	}
}

// relativePast matches fmtAgo's forms of a time gone by.
var relativePast = regexp.MustCompile(`^\((just now|[0-9][0-9a-z.]* ago)\)$`)

// TestJobPageAttemptsAndTimes: the job page gives the maximum attempts as
// a number, and its times as machine-readable UTC with a relative "ago".
func TestJobPageAttemptsAndTimes(t *testing.T) {
	q := memqueue.New()
	def := deadJobs(t, q, "mail", 1, `{}`, "boom")[0]
	set := deadJobs(t, q, "mail", 1, `{}`, "boom", queue.MaxAttempts(12))[0]
	s := serve(t, dashboard.ForQueue(q))
	for id, want := range map[string]string{def: "5", set: "12"} {
		doc := s.page("jobs/" + id).Doc
		if got := text(find(doc, byID("max-attempts"))); got != want {
			t.Errorf("job %s: max attempts %q, want %q", id, got, want)
		}
		tm := find(doc, func(n *html.Node) bool { return n.Data == "time" })
		if tm == nil || !strings.HasSuffix(attr(tm, "datetime"), "Z") {
			t.Fatalf("job %s: no <time datetime=...Z> element", id)
		}
		// The job died moments ago: "just now", or on a loaded machine
		// a few seconds "ago"; never a time to come.
		if ago := find(doc, func(n *html.Node) bool { return attr(n, "class") == "ago" }); ago == nil || !relativePast.MatchString(text(ago)) {
			t.Errorf("job %s: times carry no relative form in the past (%q)", id, text(ago))
		}
	}
}

// TestJobPageHistory: the job page lists each failed attempt with its
// start, runtime, worker and error, and the API gives the same.
func TestJobPageHistory(t *testing.T) {
	q := memqueue.New()
	j := queue.Job{Queue: "mail", Name: "SendEmail", MaxAttempts: 3}
	if err := q.Push(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	page, _ := q.ListJobs(context.Background(), driver.JobFilter{State: queue.StateReady, Queue: "mail"})
	id := page.Jobs[0].ID
	for i, w := range []string{"worker-a", "worker-b"} {
		got, err := q.Reserve(driver.WithWorker(context.Background(), w), []string{"mail"}, 1, time.Minute)
		if err != nil || len(got) != 1 {
			t.Fatal(got, err)
		}
		if i == 0 {
			err = testutil.Nack(context.Background(), q, got[0].Lease(), time.Time{}, "smtp: 421 try later")
		} else {
			err = testutil.Fail(context.Background(), q, got[0].Lease(), "smtp: 550 no such user")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	s := serve(t, dashboard.ForQueue(q))
	doc := s.page("jobs/" + id).Doc
	tbl := find(doc, byID("history"))
	if tbl == nil {
		t.Fatal("the job page shows no attempt history")
	}
	rows := findAll(tbl, func(n *html.Node) bool { return n.Data == "tr" })[1:]
	want := [][]string{{"1", "worker-a", "smtp: 421 try later"}, {"2", "worker-b", "smtp: 550 no such user"}}
	if len(rows) != len(want) {
		t.Fatalf("history has %d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		txt := text(r)
		for _, w := range want[i] {
			if !strings.Contains(txt, w) {
				t.Errorf("history row %d %q lacks %q", i+1, txt, w)
			}
		}
		if find(r, func(n *html.Node) bool { return n.Data == "time" }) == nil {
			t.Errorf("history row %d has no start time", i+1)
		}
	}
	var api struct {
		History []struct {
			Attempt int    `json:"attempt"`
			Error   string `json:"error"`
			Worker  string `json:"worker"`
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(s.page("api/jobs/"+id).Body), &api); err != nil {
		t.Fatal(err)
	}
	if len(api.History) != 2 || api.History[1].Worker != "worker-b" || api.History[0].Error != "smtp: 421 try later" {
		t.Errorf("api/jobs/{id} history = %+v", api.History)
	}
}

// TestFieldSearch: a search that starts with "payload." filters JSON
// fields, on the failed page and in api/jobs?q=, on memqueue and SQLite;
// one that does not parse answers 400 saying where and what was
// expected, on the page and in the API, and lists nothing.
func TestFieldSearch(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) queue.Queue{
		"memqueue": func(*testing.T) queue.Queue { return memqueue.New() },
		"sqlite":   openSQLite,
	} {
		t.Run(name, func(t *testing.T) {
			q := open(t)
			ann := deadJobs(t, q, "mail", 1, `{"user_id":42,"to":"ann"}`, "boom")[0]
			bob := deadJobs(t, q, "mail", 3, `{"user_id":7,"to":"bob"}`, "boom")
			deadJobs(t, q, "mail", 1, `user_id 42, not JSON`, "boom")
			s := serve(t, dashboard.ForQueue(q.(inspectQueue)))

			list := decode(t, s.page("api/jobs?state=failed&q="+url.QueryEscape(`payload.user_id = 42 AND "ann"`)).Body)
			jobs := list["jobs"].([]any)
			if len(jobs) != 1 || jobs[0].(map[string]any)["id"] != ann {
				t.Errorf("api/jobs with a field filter = %v, want job %s alone", jobs, ann)
			}
			page := s.page("failed?q=" + url.QueryEscape("payload.user_id != 42"))
			for _, id := range bob {
				if !strings.Contains(page.Body, id) {
					t.Errorf("failed?q=payload.user_id != 42 does not list %s", id)
				}
			}
			if strings.Contains(page.Body, ann) {
				t.Errorf("failed?q=payload.user_id != 42 lists %s, whose user_id is 42", ann)
			}

			const bad = "payload.user_id = forty"
			const want = `bad search: at position 19: expected a value (a &#34;string&#34;, a number, true, false or null), found &#34;forty&#34;`
			r := s.get(s.url("failed?q=" + url.QueryEscape(bad)))
			if r.StatusCode != http.StatusBadRequest || !strings.Contains(r.Body, want) {
				t.Errorf("failed?q=%s = %d, want 400 saying %s:\n%s", bad, r.StatusCode, want, r.Body)
			}
			r = s.get(s.url("api/jobs?state=failed&q=" + url.QueryEscape(bad)))
			if got := decode(t, r.Body)["error"]; r.StatusCode != http.StatusBadRequest || got != html.UnescapeString(want) {
				t.Errorf("api/jobs?q=%s = %d %q, want 400 %q", bad, r.StatusCode, got, html.UnescapeString(want))
			}
		})
	}
}
