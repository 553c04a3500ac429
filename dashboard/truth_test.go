package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestJobPageLimitOfTheWorker: a job its worker's MaxRetry(3) dead-letters
// at 3 shows "3 of at most 3" and says the limit is the setting of the
// workers serving its queue, not the default 5 (issue 28).
func TestJobPageLimitOfTheWorker(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	j, err := queue.NewJob(struct{}{}, queue.OnQueue("mail"))
	if err != nil {
		t.Fatal(err)
	}
	j.Name = "SendEmail"
	if err := q.Push(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	w := queue.NewWorker(q).MaxRetry(3).Backoff(0).Queues("mail").Poll(10 * time.Millisecond)
	w.Register("SendEmail", func(context.Context, queue.Job) error { return errors.New("boom") })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		<-done
	})
	t.Cleanup(stop)
	testutil.Eventually(t, 10*time.Second, func() bool {
		info, err := q.GetJob(context.Background(), j.ID)
		return err == nil && info.State == queue.StateDead
	}, "the job was not dead-lettered")

	s := serve(t, dashboard.ForQueue(q))
	doc := s.page("jobs/" + j.ID).Doc
	if got := text(find(doc, byID("attempts"))); !strings.HasPrefix(got, "3 of at most 3 ") {
		t.Errorf("attempts read %q, want 3 of at most 3", got)
	}
	if got := text(find(doc, byID("max-attempts-note"))); !strings.Contains(got, "the limit that applied when it failed for good") {
		t.Errorf("the limit's note reads %q, want it to say it is the limit that applied", got)
	}

	// Once the worker has gone (it deletes its record as Run returns),
	// the dead letter still shows the
	// limit its worker applied, stored with it, not the default 5.
	stop()
	if ws, err := q.Workers(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("workers after the worker's record was deleted: %v, %v; want none", ws, err)
	}
	doc = s.page("jobs/" + j.ID).Doc
	if got := text(find(doc, byID("attempts"))); !strings.HasPrefix(got, "3 of at most 3 ") {
		t.Errorf("with the worker gone, attempts read %q, want 3 of at most 3", got)
	}
}

// TestJobPageAttemptLimits: the job page takes a job's limit from the job
// when it carries one, else from the live workers serving its queue (one
// number when they agree, each when they differ), else says the default
// applies because no worker serves the queue.
func TestJobPageAttemptLimits(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ctx := context.Background()
	def := deadJobs(t, q, "mail", 1, `{}`, "boom")[0]
	own := deadJobs(t, q, "mail", 1, `{}`, "boom", queue.MaxAttempts(12))[0]
	s := serve(t, dashboard.ForQueue(q))
	check := func(step, id, limit, note string) {
		t.Helper()
		doc := s.page("jobs/" + id).Doc
		if got := text(find(doc, byID("max-attempts"))); got != limit {
			t.Errorf("%s: max attempts %q, want %q", step, got, limit)
		}
		if got := text(find(doc, byID("max-attempts-note"))); !strings.Contains(got, note) {
			t.Errorf("%s: the limit's note reads %q, want it to say %q", step, got, note)
		}
	}
	beat := func(w driver.WorkerInfo) {
		t.Helper()
		if err := q.Heartbeat(ctx, w); err != nil {
			t.Fatal(err)
		}
	}

	check("no worker", def, "5", "the default: no live worker serves queue mail")
	check("own limit", own, "12", "the limit that applied")
	beat(driver.WorkerInfo{ID: "w-other", Queues: []string{"other"}, Concurrency: 1, MaxAttempts: 9})
	check("a worker of another queue", def, "5", "no live worker serves queue mail")
	beat(driver.WorkerInfo{ID: "w-1", Queues: []string{"other", "mail"}, Concurrency: 1, MaxAttempts: 3})
	beat(driver.WorkerInfo{ID: "w-2", Queues: []string{"mail"}, Concurrency: 1, MaxAttempts: 3})
	check("two workers agreeing", def, "3", "the setting of the workers serving queue mail")
	check("own limit beside workers", own, "12", "the limit that applied")
	beat(driver.WorkerInfo{ID: "w-3", Queues: []string{"mail"}, Concurrency: 1, MaxAttempts: 8})
	check("workers differing", def, "3 or 8", "differ: 3 on 2 workers, 8 on 1 worker")
	beat(driver.WorkerInfo{ID: "w-old", Queues: []string{"mail"}, Concurrency: 1})
	check("a worker reporting none", def, "3 or 8", "1 worker of an earlier release, which report none")

	// The Workers page gives each worker's limit.
	doc := s.page("workers").Doc
	for id, want := range map[string]string{"w-1": "3", "w-3": "8", "w-old": "—"} {
		row := find(doc, func(n *html.Node) bool { return attr(n, "data-worker") == id })
		if row == nil {
			t.Fatalf("the Workers page has no row for %s", id)
		}
		if got := text(find(row, func(n *html.Node) bool { return hasAttr(n, "data-max-attempts") })); got != want {
			t.Errorf("the Workers page gives %s max attempts %q, want %q", id, got, want)
		}
	}
}

// readAt returns the page's "read at" time, checking that it is given in
// UTC with a machine-readable datetime.
func readAt(t *testing.T, doc *html.Node, which int) time.Time {
	t.Helper()
	p := find(doc, byID("read-at"))
	if p == nil {
		t.Fatal("the page has no read-at line")
	}
	tms := findAll(p, byTag("time"))
	if len(tms) <= which {
		t.Fatalf("the read-at line %q has %d times, want at least %d", text(p), len(tms), which+1)
	}
	tm := tms[which]
	at, err := time.Parse(time.RFC3339Nano, attr(tm, "datetime"))
	if err != nil {
		t.Fatalf("read-at datetime %q: %v", attr(tm, "datetime"), err)
	}
	if want := at.UTC().Format("15:04:05 UTC"); text(tm) != want {
		t.Errorf("read-at shows %q, want %q", text(tm), want)
	}
	return at
}

// TestPagesSayWhenRead: every page says when its figures were read; the
// overview, served from the shared figures, gives the time of the read
// that produced them, not that of the request, and a list whose tab
// counts come from an earlier read gives both times.
func TestPagesSayWhenRead(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	id := deadJobs(t, q, "mail", 1, `{}`, "boom")[0]
	qi := dashboard.ForQueue(q)
	s := serve(t, qi)

	before := time.Now()
	doc := s.page("jobs/" + id).Doc
	if at := readAt(t, doc, 0); at.Before(before) || at.After(time.Now()) {
		t.Errorf("the job page says read at %v, want the request's time (%v on)", at, before)
	}

	sv, err := qi.Figures(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Figures up to 15 seconds old are served at once: wait until the
	// clock shows a later second than the read's.
	testutil.Eventually(t, 5*time.Second, func() bool {
		return time.Now().Truncate(time.Second).After(sv.At.Truncate(time.Second))
	}, "the clock did not move on")
	if at := readAt(t, s.page("").Doc, 0); !at.Equal(sv.At) {
		t.Errorf("the overview says read at %v, want the shared read's time %v", at, sv.At)
	}
	for _, rel := range []string{"jobs?state=dead", "queue/mail"} {
		doc := s.page(rel).Doc
		if at := readAt(t, doc, 1); !at.Equal(sv.At) {
			t.Errorf("%s gives its figures as read at %v, want the shared read's time %v", rel, at, sv.At)
		}
		if own := readAt(t, doc, 0); !own.After(sv.At) {
			t.Errorf("%s says read at %v, want the time of its own reads, after %v", rel, own, sv.At)
		}
	}

	// The live refresh gets the line too, first in the region.
	req, _ := http.NewRequest(http.MethodGet, s.url("jobs/"+id), nil)
	req.Header.Set("X-Meridian-Partial", "1")
	if r := s.do(req); !strings.HasPrefix(r.Body, `<p class="read-at hint" id="read-at">`) {
		t.Errorf("the partial page begins %.80q, want the read-at line", r.Body)
	}
}
