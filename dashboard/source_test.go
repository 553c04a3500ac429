package dashboard_test

import (
	"context"
	"errors"
	"slices"
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

// recordingSource wraps a Source and records, for each method called,
// whether its context carried the request's deadline.
type recordingSource struct {
	dashboard.Source
	mu    sync.Mutex
	calls map[string]bool // method -> every call had a deadline
}

func (r *recordingSource) note(method string, ctx context.Context) {
	_, ok := ctx.Deadline()
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, seen := r.calls[method]; seen {
		ok = ok && prev
	}
	r.calls[method] = ok
}

func (r *recordingSource) Figures(ctx context.Context) (dashboard.StatsView, error) {
	r.note("Figures", ctx)
	return r.Source.Figures(ctx)
}

func (r *recordingSource) Metrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error) {
	r.note("Metrics", ctx)
	return r.Source.Metrics(ctx, since)
}

func (r *recordingSource) List(ctx context.Context, q dashboard.ListQuery) (dashboard.JobList, error) {
	r.note("List", ctx)
	return r.Source.List(ctx, q)
}

func (r *recordingSource) Job(ctx context.Context, id string) (dashboard.JobView, error) {
	r.note("Job", ctx)
	return r.Source.Job(ctx, id)
}

func (r *recordingSource) RetryJob(ctx context.Context, id string) error {
	r.note("RetryJob", ctx)
	return r.Source.RetryJob(ctx, id)
}

func (r *recordingSource) ForgetJob(ctx context.Context, id string) error {
	r.note("ForgetJob", ctx)
	return r.Source.ForgetJob(ctx, id)
}

func (r *recordingSource) Flush(ctx context.Context, q string) (int, error) {
	r.note("Flush", ctx)
	return r.Source.Flush(ctx, q)
}

func (r *recordingSource) SetPaused(ctx context.Context, q string, paused bool) error {
	r.note("SetPaused", ctx)
	return r.Source.SetPaused(ctx, q, paused)
}

func (r *recordingSource) Workers(ctx context.Context) ([]driver.WorkerInfo, error) {
	r.note("Workers", ctx)
	return r.Source.Workers(ctx)
}

// A Source of the application's own serves every page and endpoint, and
// each of its methods gets the request's context, bounded by
// RequestTimeout.
func TestEverySourceMethodGetsTheRequestContext(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 3, `{}`, "boom")
	src := &recordingSource{Source: dashboard.ForQueue(q), calls: map[string]bool{}}
	s := serve(t, src, dashboard.RequestTimeout(time.Minute))

	for _, p := range []string{"", "failed", "jobs?state=ready", "jobs/" + ids[0], "queue/emails", "workers",
		"api/stats", "api/jobs", "api/jobs/" + ids[0], "api/metrics", "api/workers"} {
		s.page(p)
	}
	detail := s.page("jobs/" + ids[0])
	retry := find(detail.Doc, func(n *html.Node) bool { return n.Data == "form" && find(n, byID("retry")) != nil })
	s.follow(s.submit(s.url("jobs/"+ids[0]), retry, nil, nil))
	list := s.page("failed")
	forget := formWithAction(list.Doc, "failed/"+ids[1]+"/forget")
	if forget == nil {
		t.Fatalf("no forget form for %s:\n%s", ids[1], list.Body)
	}
	s.follow(s.submit(s.url("failed"), forget, nil, nil))
	s.follow(s.submit(s.url("failed"), formWithAction(s.page("failed").Doc, "failed/flush"), nil, nil))
	queuePage := s.page("queue/emails")
	s.follow(s.submit(s.url("queue/emails"), formWithAction(queuePage.Doc, "emails/pause"), nil, nil))

	want := []string{"Figures", "Flush", "ForgetJob", "Job", "List", "Metrics", "RetryJob", "SetPaused", "Workers"}
	src.mu.Lock()
	defer src.mu.Unlock()
	var got []string
	for m, deadline := range src.calls {
		got = append(got, m)
		if !deadline {
			t.Errorf("%s was called with a context without the request's deadline", m)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("methods called = %v, want every one: %v", got, want)
	}
}

// plainInspector is an Inspector of the cookbook's interface written by an
// application: two failed jobs, no detail, no charts.
type plainInspector struct{ retried []string }

func (p *plainInspector) Stats() (dashboard.StatsView, error) {
	var qs dashboard.QueueStats
	qs.Queue, qs.Processed, qs.Failed, qs.Pending = "emails", 1234567, 2, 3
	return dashboard.StatsView{Queues: []dashboard.QueueStats{qs}, Totals: qs, At: time.Now()}, nil
}

func (p *plainInspector) Pending(string, int) ([]dashboard.JobView, error) { return nil, nil }

func (p *plainInspector) Failed(page int) ([]dashboard.JobView, error) {
	if page > 1 {
		return nil, nil
	}
	var out []dashboard.JobView
	for _, id := range []string{"f1", "f2"} {
		var j dashboard.JobView
		j.ID, j.Queue, j.Name, j.State, j.LastError = id, "emails", "Mail", queue.StateDead, "smtp"
		j.LeaseToken = "secret-lease"
		out = append(out, j)
	}
	return out, nil
}

func (p *plainInspector) Retry(id string) error {
	if id != "f1" && id != "f2" {
		return dashboard.ErrNotFound
	}
	p.retried = append(p.retried, id)
	return nil
}

func (p *plainInspector) Forget(string) error { return errors.New("not here") }
func (p *plainInspector) FlushFailed() error  { return nil }

// InspectorSource serves an application's own Inspector: the overview and
// the failed list by page number, with retry; no job pages, no charts, and
// no lease token shown.
func TestInspectorSourceServesACookbookInspector(t *testing.T) {
	t.Parallel()
	insp := &plainInspector{}
	s := serve(t, dashboard.InspectorSource(insp))

	over := s.page("")
	if !strings.Contains(over.Body, "1,234,567") {
		t.Errorf("overview does not show the processed count with separators:\n%s", over.Body)
	}
	if strings.Contains(over.Body, `href="./jobs"`) || strings.Contains(over.Body, "<svg") {
		t.Errorf("overview offers job lists or charts the Inspector cannot give:\n%s", over.Body)
	}
	list := s.page("failed")
	if got := rowIDs(list.Doc); !slices.Equal(got, []string{"f1", "f2"}) {
		t.Fatalf("failed rows = %v, want f1 f2", got)
	}
	if strings.Contains(list.Body, "secret-lease") || strings.Contains(list.Body, `href="./jobs/`) {
		t.Errorf("failed list shows a lease token or links job pages:\n%s", list.Body)
	}
	s.follow(s.submit(s.url("failed"), formWithAction(list.Doc, "failed/f2/retry"), nil, nil))
	if !slices.Equal(insp.retried, []string{"f2"}) {
		t.Errorf("retried %v, want f2", insp.retried)
	}
	if r := s.get(s.url("jobs/f1")); r.StatusCode != 404 {
		t.Errorf("job page without Detail: %d, want 404", r.StatusCode)
	}
	if r := s.get(s.url("api/metrics")); r.StatusCode != 404 {
		t.Errorf("api/metrics without Charts: %d, want 404", r.StatusCode)
	}
}

func TestHandlerPanicsOnNilSource(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Handler(nil) did not panic")
		}
	}()
	dashboard.Handler(nil)
}
