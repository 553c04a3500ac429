package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/queue"
)

func TestMemoryFailedJobsRetryDropsBeforeRequeue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var failed *dashboard.MemoryFailedJobs
	var requeued []queue.Job
	failed = dashboard.NewMemoryFailedJobs(func(ctx context.Context, j queue.Job) error {
		// By the time the job is re-enqueued its record is gone.
		list, _ := failed.List(ctx)
		for _, fj := range list {
			if fj.ID == j.ID {
				t.Errorf("record %s still listed while re-enqueueing", j.ID)
			}
		}
		requeued = append(requeued, j)
		return nil
	})
	stats := dashboard.NewStats()
	failed.WithStats(stats)
	for i, id := range []string{"a", "b", "c"} {
		failed.Record(queue.Job{ID: id, Name: "Mail", Payload: []byte(`{}`)}, "emails", fmt.Errorf("fail %d", i))
	}
	if n := failed.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
	list, err := failed.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, fj := range list {
		order = append(order, fj.ID)
	}
	if !slices.Equal(order, []string{"c", "b", "a"}) {
		t.Errorf("List order = %v, want newest first [c b a]", order)
	}
	if list[0].Err != "fail 2" || list[0].Queue != "emails" || list[0].FailedAt.IsZero() {
		t.Errorf("record = %+v", list[0])
	}
	if err := failed.Retry(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if len(requeued) != 1 || requeued[0].ID != "b" || string(requeued[0].Payload) != `{}` {
		t.Fatalf("requeued %+v, want job b with its payload", requeued)
	}
	if failed.Len() != 2 {
		t.Errorf("Len after retry = %d, want 2", failed.Len())
	}
	sv, _ := dashboard.NewInspector(stats, failed).Stats()
	if len(sv.Queues) != 1 || sv.Queues[0].Retried != 1 {
		t.Errorf("WithStats: retried = %+v, want 1 for emails", sv.Queues)
	}
	for _, op := range []func(context.Context, string) error{failed.Retry, failed.Forget} {
		err := op(ctx, "b")
		if !errors.Is(err, dashboard.ErrNotFound) || !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("second action on b: %v, want ErrNotFound", err)
		}
	}
	if err := failed.Forget(ctx, "a"); err != nil || failed.Len() != 1 {
		t.Errorf("Forget(a): %v, Len %d", err, failed.Len())
	}
	if len(requeued) != 1 {
		t.Errorf("Forget re-enqueued a job")
	}
}

func TestMemoryFailedJobsRequeueErrorKeepsRecord(t *testing.T) {
	t.Parallel()
	boom := errors.New("queue down")
	failed := dashboard.NewMemoryFailedJobs(func(context.Context, queue.Job) error { return boom })
	failed.Record(queue.Job{ID: "x"}, "default", errors.New("handler"))
	err := failed.Retry(context.Background(), "x")
	if !errors.Is(err, boom) {
		t.Fatalf("Retry = %v, want the requeue error", err)
	}
	if failed.Len() != 1 {
		t.Errorf("a failed requeue lost the record: Len = %d", failed.Len())
	}
}

func TestMemoryFailedJobsNilRequeueForgets(t *testing.T) {
	t.Parallel()
	failed := dashboard.NewMemoryFailedJobs(nil)
	failed.Record(queue.Job{}, "default", nil) // no ID: the store gives one
	list, _ := failed.List(context.Background())
	if len(list) != 1 || list[0].ID == "" || list[0].Job.ID != list[0].ID {
		t.Fatalf("record of a job without ID: %+v", list)
	}
	if err := failed.Retry(context.Background(), list[0].ID); err != nil || failed.Len() != 0 {
		t.Errorf("forget-only Retry: %v, Len %d", err, failed.Len())
	}
}

func TestStatsCounters(t *testing.T) {
	t.Parallel()
	stats := dashboard.NewStats()
	for range 3 {
		stats.OnPushed("emails")
	}
	stats.OnProcessed("emails")
	stats.OnRetried("emails")
	stats.OnFailed("emails")
	stats.OnPushed("audio")
	sv, err := dashboard.NewInspector(stats, nil).Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(sv.Queues) != 2 || sv.Queues[0].Queue != "audio" || sv.Queues[1].Queue != "emails" {
		t.Fatalf("queues = %+v, want audio and emails, sorted", sv.Queues)
	}
	e := sv.Queues[1]
	if e.Pushed != 3 || e.Processed != 1 || e.Retried != 1 || e.Failed != 1 || e.Pending != 1 {
		t.Errorf("emails = %+v, want pushed 3, processed 1, retried 1, failed 1, pending 1", e)
	}
	if e.JobsPerMinute != 1 || e.Throughput != 1.0/60 {
		t.Errorf("rate = %v/min, %v/s; want 1 processed in the last minute", e.JobsPerMinute, e.Throughput)
	}
	if sv.Totals.Failed != 1 || sv.Totals.Pending != 2 || sv.Totals.Pushed != 4 {
		t.Errorf("totals = %+v", sv.Totals)
	}
}

func TestNewInspectorNilParts(t *testing.T) {
	t.Parallel()
	var store *dashboard.MemoryFailedJobs
	insp := dashboard.NewInspector(nil, store)
	sv, err := insp.Stats()
	if err != nil || len(sv.Queues) != 0 {
		t.Errorf("Stats = %+v, %v; want empty", sv, err)
	}
	if jobs, err := insp.Failed(1); err != nil || len(jobs) != 0 {
		t.Errorf("Failed = %v, %v; want empty", jobs, err)
	}
	for name, act := range map[string]func() error{
		"Retry": func() error { return insp.Retry("x") }, "Forget": func() error { return insp.Forget("x") },
		"FlushFailed": insp.FlushFailed,
	} {
		if act() == nil {
			t.Errorf("%s without a store succeeded", name)
		}
	}
}

func TestInspectorFailedPages(t *testing.T) {
	t.Parallel()
	failed := dashboard.NewMemoryFailedJobs(nil)
	for i := range dashboard.PageSize + 7 {
		failed.Record(queue.Job{ID: fmt.Sprint("j", i)}, "q", errors.New("x"))
	}
	insp := dashboard.NewInspector(nil, failed)
	p1, _ := insp.Failed(1)
	p2, _ := insp.Failed(2)
	if len(p1) != dashboard.PageSize || len(p2) != 7 {
		t.Fatalf("pages of %d and %d, want %d and 7", len(p1), len(p2), dashboard.PageSize)
	}
	if p1[0].ID != fmt.Sprint("j", dashboard.PageSize+6) || p2[6].ID != "j0" || p1[0].State != queue.StateDead || p1[0].LastError != "x" {
		t.Errorf("first row %+v, last row %+v", p1[0], p2[6])
	}
	if err := insp.FlushFailed(); err != nil || failed.Len() != 0 {
		t.Errorf("FlushFailed: %v, %d left", err, failed.Len())
	}
}

// countingInspector is an Inspector whose processed counter grows by 10 on
// every read.
type countingInspector struct {
	dashboard.Inspector
	mu chan struct{}
	n  int64
}

func (c *countingInspector) Stats() (dashboard.StatsView, error) {
	c.mu <- struct{}{}
	defer func() { <-c.mu }()
	c.n += 10
	var qs dashboard.QueueStats
	qs.Queue = "default"
	qs.Processed = c.n
	return dashboard.StatsView{Queues: []dashboard.QueueStats{qs}}, nil
}

// TestSampler runs in a synctest bubble: the ticker and the sleeps are the
// bubble's fake clock, so a loaded machine cannot reorder or skip samples.
func TestSampler(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		insp := &countingInspector{mu: make(chan struct{}, 1)}
		s := dashboard.NewSampler(insp, 5*time.Millisecond, time.Minute).Start()
		time.Sleep(12 * time.Millisecond) // the first sample and ticks at 5 and 10 ms
		synctest.Wait()
		s.Stop()
		w := s.Window("default")
		if len(w) != 3 {
			t.Fatalf("%d samples after 12 ms at a 5 ms interval, want 3: %+v", len(w), w)
		}
		if s.Rate("default") <= 0 {
			t.Errorf("Rate = %v, want > 0", s.Rate("default"))
		}
		for i := 1; i < len(w); i++ {
			if !w[i].At.After(w[i-1].At) || w[i].Processed <= w[i-1].Processed {
				t.Errorf("samples out of order: %+v", w)
			}
		}
		time.Sleep(20 * time.Millisecond)
		if len(s.Window("default")) != len(w) {
			t.Error("sampler kept sampling after Stop")
		}
		if s.Rate("other") != 0 || s.Window("other") != nil {
			t.Error("unknown queue has samples")
		}
		s.Stop() // a second Stop does nothing
	})
}

// The cookbook's wiring: counters and a failed-job store fed by the
// application, read back as a snapshot.
func Example() {
	ctx := context.Background()
	var pushed []queue.Job
	stats := dashboard.NewStats()
	failed := dashboard.NewMemoryFailedJobs(func(ctx context.Context, j queue.Job) error {
		pushed = append(pushed, j) // q.Push(ctx, j) in an application
		return nil
	}).WithStats(stats)

	stats.OnPushed("default")
	stats.OnPushed("default")
	stats.OnProcessed("default")
	stats.OnFailed("default")
	failed.Record(queue.Job{ID: "job-1", Name: "SendWelcomeEmail"}, "default", errors.New("smtp: timeout"))

	insp := dashboard.NewInspector(stats, failed)
	sv, _ := insp.Stats()
	for _, qs := range sv.Queues {
		fmt.Printf("%s: processed=%d failed=%d pending=%d\n", qs.Queue, qs.Processed, qs.Failed, qs.Pending)
	}
	fmt.Println("total failed:", sv.Totals.Failed)

	_ = failed.Retry(ctx, "job-1")
	fmt.Println("re-enqueued:", pushed[0].Name, "failed left:", failed.Len())
	// Output:
	// default: processed=1 failed=1 pending=0
	// total failed: 1
	// re-enqueued: SendWelcomeEmail failed left: 0
}
