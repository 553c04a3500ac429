package redisqueue_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestCancelCounts checks that Cancel counts each cancelled job in its
// queue's totals (<base>:stats) in the same script, whatever state it
// was in, and leaves none of its keys behind.
func TestCancelCounts(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q := newQueue(t, rdb, prefix(t, rdb))
	ctx := t.Context()
	var js []queue.Job
	for i := range 3 {
		j := queue.Job{ID: driver.NewID(), Queue: "cc", Name: "n", UniqueKey: "k" + string(rune('a'+i))}
		if i == 1 {
			j.AvailableAt = time.Now().Add(time.Hour)
		}
		if err := q.Push(ctx, j); err != nil {
			t.Fatal(err)
		}
		js = append(js, j)
	}
	got, err := q.Reserve(ctx, []string{"cc"}, 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("Reserve = %d jobs, %v", len(got), err)
	}
	want := map[string]driver.JobState{got[0].ID: queue.StateRunning, js[1].ID: queue.StateScheduled}
	for _, j := range js {
		if _, ok := want[j.ID]; !ok {
			want[j.ID] = queue.StateReady
		}
	}
	for id, st := range want {
		if was, err := q.Cancel(ctx, id); err != nil || was != st {
			t.Fatalf("Cancel(%s) = %q, %v; want %q", id, was, err, st)
		}
	}
	base := "{" + q.Prefix() + ":cc}"
	if n, err := rdb.HGet(ctx, base+":stats", "cancelled").Int(); err != nil || n != 3 {
		t.Errorf("cancelled total = %d, %v; want 3", n, err)
	}
	for _, k := range []string{":ready", ":sched", ":run", ":uniq"} {
		if n, err := rdb.Exists(ctx, base+k).Result(); err != nil || n != 0 {
			t.Errorf("%s%s still exists after every job was cancelled (%v)", base, k, err)
		}
	}
	for _, j := range js {
		if n, err := rdb.Exists(ctx, base+":j:"+j.ID).Result(); err != nil || n != 0 {
			t.Errorf("the hash of cancelled job %s is left (%v)", j.ID, err)
		}
	}
	// A second cancel finds nothing: the store keeps no cancelled jobs.
	if _, err := q.Cancel(ctx, js[0].ID); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Cancel of a cancelled job: %v, want ErrNotFound", err)
	}
}

// TestPauseAcrossProcesses pauses a queue from one client while a Worker
// on another waits on it: the Worker takes no job while it is paused, its
// Wait does not spin on the paused queue's ready jobs, and the Resume
// wakes it although its poll is an hour.
func TestPauseAcrossProcesses(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	admin := newQueue(t, client(t), p)
	q := newQueue(t, rdb, p)
	ctx := t.Context()
	if err := admin.Pause(ctx, "pz"); err != nil {
		t.Fatal(err)
	}
	if err := queue.Dispatch(ctx, admin, ping{1}, queue.OnQueue("pz")); err != nil {
		t.Fatal(err)
	}

	// A Wait on the paused queue blocks despite its ready job. It runs
	// on a handle of its own, closed after, so that the subscription
	// counted below is the Worker's.
	probe := newQueue(t, client(t), p)
	start := time.Now()
	if err := probe.Wait(ctx, []string{"pz"}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("Wait on a paused queue with a ready job returned after %s, want its max (300ms): a worker would spin", took)
	}
	probe.Close()
	subscribed := func() int64 {
		n, err := rdb.PubSubNumSub(ctx, "{"+p+"}:wake").Result()
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		return n["{"+p+"}:wake"]
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return subscribed() == 0 }, "the probe's subscription outlived its Close")

	ran := make(chan int, 1)
	w := queue.NewWorker(q).Poll(time.Hour).Queues("pz").Slog(slog.New(slog.DiscardHandler))
	queue.Handle(w, func(ctx context.Context, p ping) error { ran <- p.N; return nil })
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Worker.Run: %v", err)
		}
	}()
	// Once the Worker waits (subscribed, after a Reserve that found
	// nothing), nothing has run.
	testutil.Eventually(t, 10*time.Second, func() bool { return subscribed() == 1 }, "the Worker did not subscribe")
	select {
	case n := <-ran:
		t.Fatalf("job %d ran on a paused queue", n)
	default:
	}
	if err := admin.Resume(ctx, "pz"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run within 10s of Resume under an hour's poll")
	}
}

// TestCancelledSinceClock checks that CancelledSince answers from the cancel
// log by the cancelling process's clock: a lease cancelled now is listed
// from a second ago, not from a second ahead.
func TestCancelledSinceClock(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q := newQueue(t, rdb, prefix(t, rdb))
	ctx := t.Context()
	j := queue.Job{ID: driver.NewID(), Queue: "cl", Name: "n"}
	if err := q.Push(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := q.Reserve(ctx, []string{"cl"}, 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("Reserve = %d jobs, %v", len(got), err)
	}
	if _, err := q.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		since time.Time
		want  int
	}{{time.Now().Add(-time.Second), 1}, {time.Now().Add(time.Second), 0}} {
		ls, err := q.CancelledSince(ctx, c.since)
		if err != nil || len(ls) != c.want || (c.want == 1 && ls[0] != got[0].Lease()) {
			t.Errorf("CancelledSince(%s) = %v, %v; want %d lease(s) of %v", c.since, ls, err, c.want, got[0].Lease())
		}
	}
}

// TestCancelBatchMembers checks the meeting of cancels and batches: a
// member cancelled on its own counts as cancelled in its batch when
// Cancel returns, and a running member cancelled with its batch has its
// lease written to the cancel log, so that its Worker stops the handler
// with ErrCancelled as after Cancel.
func TestCancelBatchMembers(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q := newQueue(t, rdb, prefix(t, rdb))
	ctx := t.Context()
	id, err := queue.DispatchBatch(ctx, q, protoBatch(t, 3))
	if err != nil {
		t.Fatal(err)
	}
	jobs := reserveAll(t, q, "bm", 3)
	if err := testutil.Complete(ctx, q, driver.Completion{Lease: jobs[0].Lease(), Outcome: driver.OutcomeRetried, Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	if was, err := q.Cancel(ctx, jobs[0].ID); err != nil || was != queue.StateReady {
		t.Fatalf("Cancel of a waiting member = %q, %v; want ready", was, err)
	}
	wantCounts(t, "after cancelling a member", getInfo(t, q, id), 2, 0, 0, 1)

	before := time.Now().Add(-time.Second)
	if _, err := q.CancelBatch(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, "after cancelling the batch", getInfo(t, q, id), 0, 0, 0, 3)
	leases, err := q.CancelledSince(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(leases, func(a, b driver.Lease) int { return strings.Compare(a.JobID, b.JobID) })
	want := []driver.Lease{jobs[1].Lease(), jobs[2].Lease()}
	slices.SortFunc(want, func(a, b driver.Lease) int { return strings.Compare(a.JobID, b.JobID) })
	if !slices.Equal(leases, want) {
		t.Errorf("CancelledSince after CancelBatch = %v, want the running members' leases %v", leases, want)
	}
}

// TestActOnChunks runs the bulk actions over more jobs than one script
// changes (bulkChunk, 500): the limits hold across chunks, the counts
// follow, and a bulk cancel of running jobs writes their leases to the
// cancel log as Cancel does.
func TestActOnChunks(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q := newQueue(t, rdb, prefix(t, rdb))
	ctx := t.Context()
	const n = 1200
	jobs := make([]queue.Job, n)
	for i := range jobs {
		jobs[i] = queue.Job{ID: driver.NewID(), Queue: "bulk", Name: "n"}
	}
	if _, err := q.PushMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	got, err := q.Reserve(ctx, []string{"bulk"}, n, time.Minute)
	if err != nil || len(got) != n {
		t.Fatalf("Reserve = %d jobs, %v; want %d", len(got), err, n)
	}
	outs := make([]driver.Completion, n)
	for i, j := range got {
		outs[i] = driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeFailed, Reason: "bulk"}
	}
	if _, errs, err := q.Complete(ctx, nil, outs); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("Complete(failed) = %v, %v", errs, err)
	}

	dead := driver.JobFilter{State: queue.StateDead, Queue: "bulk"}
	count := func(f driver.JobFilter, limit int, want driver.Count) {
		t.Helper()
		if c, err := q.CountJobs(ctx, f, limit); err != nil || c != want {
			t.Fatalf("CountJobs(%s, %d) = %+v, %v; want %+v", f.State, limit, c, err, want)
		}
	}
	count(dead, 5000, driver.Count{N: n})
	count(dead, 1000, driver.Count{N: 1000, More: true})
	count(driver.JobFilter{State: queue.StateDead, Queue: "bulk", Name: "n"}, 5000, driver.Count{N: n})

	act := func(f driver.JobFilter, a driver.BulkAction, limit, want int) {
		t.Helper()
		if got, err := q.ActOn(ctx, f, a, limit, driver.Action{}); err != nil || got != want {
			t.Fatalf("ActOn(%s, %s, %d) = %d, %v; want %d", f.State, a, limit, got, err, want)
		}
	}
	act(dead, driver.BulkRetry, 1100, 1100)
	count(dead, 5000, driver.Count{N: 100})
	ready := driver.JobFilter{State: queue.StateReady, Queue: "bulk"}
	count(ready, 5000, driver.Count{N: 1100})
	count(driver.JobFilter{State: queue.StateReady, Name: "n"}, 1000, driver.Count{N: 1000, More: true})

	// Two of the retried jobs run; a bulk cancel of the running ones
	// logs their leases, and one of the ready ones leaves the rest.
	before := time.Now().Add(-time.Second)
	running, err := q.Reserve(ctx, []string{"bulk"}, 2, time.Minute)
	if err != nil || len(running) != 2 {
		t.Fatalf("Reserve = %d jobs, %v; want 2", len(running), err)
	}
	count(driver.JobFilter{State: queue.StateRunning, Queue: "bulk"}, 10, driver.Count{N: 2})
	count(driver.JobFilter{State: queue.StateRunning, Queue: "bulk", Name: "n"}, 10, driver.Count{N: 2})
	act(driver.JobFilter{State: queue.StateRunning, Queue: "bulk"}, driver.BulkCancel, 10, 2)
	leases, err := q.CancelledSince(ctx, before)
	if err != nil || len(leases) != 2 {
		t.Fatalf("CancelledSince after a bulk cancel of 2 running jobs = %v, %v", leases, err)
	}
	for _, j := range running {
		if err := testutil.Ack(ctx, q, j.Lease()); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("Ack of a job cancelled in bulk: %v, want ErrLeaseLost", err)
		}
	}
	act(ready, driver.BulkCancel, 5000, 1098)
	act(dead, driver.BulkForget, 5000, 100)
	if l, err := q.Len(ctx, "bulk"); err != nil || l != 0 {
		t.Errorf("Len after cancelling and forgetting every job = %d, %v; want 0", l, err)
	}
	if c, err := rdb.HGet(ctx, "{"+q.Prefix()+":bulk}:stats", "cancelled").Int(); err != nil || c != 1100 {
		t.Errorf("cancelled total = %d, %v; want 1100", c, err)
	}
}
