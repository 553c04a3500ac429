package redisqueue_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// errKilled is what the hook returns at the step where the test "kills"
// the process: the protocol stops there, as it would in a process killed
// at that point.
var errKilled = errors.New("killed by the test")

// killedAt returns a hook that stops the protocol at step.
func killedAt(step string) func(string) error {
	return func(s string) error {
		if s == step {
			return errKilled
		}
		return nil
	}
}

type member struct{ N int }
type callback struct{}

// protoBatch is a batch of n members on queue "bm" with then, catch and
// finally callbacks on "cb".
func protoBatch(t *testing.T, n int) queue.Batch {
	t.Helper()
	var b queue.Batch
	for i := range n {
		j, err := queue.NewJob(member{i}, queue.OnQueue("bm"))
		if err != nil {
			t.Fatal(err)
		}
		b.Jobs = append(b.Jobs, j)
	}
	for _, cb := range []**queue.Job{&b.Then, &b.Catch, &b.Finally} {
		j, err := queue.NewJob(callback{}, queue.OnQueue("cb"))
		if err != nil {
			t.Fatal(err)
		}
		*cb = &j
	}
	return b
}

// protoSetup returns a queue whose batch protocol stops at step, and a
// peer (another process on the same prefix) that sweeps the outboxes at
// every reservation.
func protoSetup(t *testing.T, step string) (killed, peer *redisqueue.Queue) {
	t.Helper()
	rdb := client(t)
	p := prefix(t, rdb)
	killed = newQueue(t, rdb, p)
	redisqueue.SetBatchHook(killed, killedAt(step))
	peer = newQueue(t, client(t), p)
	redisqueue.SetSweepEvery(peer, 0)
	return killed, peer
}

// reserveAll reserves every job of queueName, failing unless there are n.
func reserveAll(t *testing.T, q queue.Queue, queueName string, n int) []queue.Job {
	t.Helper()
	jobs, err := q.Reserve(t.Context(), []string{queueName}, 100, time.Minute)
	if err != nil {
		t.Fatalf("Reserve(%s): %v", queueName, err)
	}
	if len(jobs) != n {
		t.Fatalf("Reserve(%s) returned %d jobs, want %d", queueName, len(jobs), n)
	}
	return jobs
}

// callbacksRun reserves and acks every callback on "cb", and returns how
// many of each event there were.
func callbacksRun(t *testing.T, q queue.Queue) map[driver.BatchEvent]int {
	t.Helper()
	got := map[driver.BatchEvent]int{}
	jobs, err := q.Reserve(t.Context(), []string{"cb"}, 100, time.Minute)
	if err != nil {
		t.Fatalf("Reserve(cb): %v", err)
	}
	for _, j := range jobs {
		got[driver.BatchEvent(j.Meta[queue.MetaBatchEvent])]++
		if err := testutil.Ack(t.Context(), q, j.Lease()); err != nil {
			t.Fatalf("Ack(callback %s): %v", j.ID, err)
		}
	}
	return got
}

func wantCounts(t *testing.T, what string, in driver.BatchInfo, pending, done, failed, cancelled int) {
	t.Helper()
	got := []int{in.Pending, in.Done, in.Failed, in.Cancelled}
	if want := []int{pending, done, failed, cancelled}; !slices.Equal(got, want) {
		t.Errorf("%s: pending, done, failed, cancelled = %v, want %v", what, got, want)
	}
}

func getInfo(t *testing.T, q *redisqueue.Queue, id string) driver.BatchInfo {
	t.Helper()
	in, err := q.GetBatch(t.Context(), id)
	if err != nil {
		t.Fatalf("GetBatch: %v", err)
	}
	return in
}

// outbox returns how many events queue name's outbox holds.
func outbox(t *testing.T, q *redisqueue.Queue, name string) int64 {
	t.Helper()
	n, err := client(t).HLen(t.Context(), "{"+q.Prefix()+":"+name+"}:bout").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBatchStepsResume kills the batch protocol (scripts_batch.go)
// between each two of its steps, checks what a reader sees in between
// (docs/drivers.md, "Batches across slots"), and that another process
// finishes the steps: the counts exact, each callback pushed once.
func TestBatchStepsResume(t *testing.T) {
	t.Parallel()
	t.Run("BetweenOutcomeAndBatch", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "member-noted")
		id, err := queue.DispatchBatch(t.Context(), killed, protoBatch(t, 2))
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range reserveAll(t, killed, "bm", 2) {
			if err := testutil.Complete(t.Context(), killed, driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Batch: id}); err != nil {
				t.Fatalf("Complete of a member: %v (the outcome is recorded: its batch's steps are left to others)", err)
			}
		}
		// In between: the members are done and gone, their batch still
		// counts them pending, no callback is pushed.
		if n, _ := peer.Len(t.Context(), "bm"); n != 0 {
			t.Errorf("Len(bm) = %d in between, want 0", n)
		}
		wantCounts(t, "in between", getInfo(t, peer, id), 2, 0, 0, 0)
		if n := outbox(t, peer, "bm"); n != 2 {
			t.Errorf("the outbox holds %d events in between, want 2", n)
		}
		if got := callbacksRun(t, peer); len(got) != 0 {
			t.Errorf("callbacks %v pushed in between, want none", got)
		}
		// Another process reserving from the queue finishes the steps.
		reserveAll(t, peer, "bm", 0)
		in := getInfo(t, peer, id)
		wantCounts(t, "after the sweep", in, 0, 2, 0, 0)
		if !in.Finished() || in.ThenAt.IsZero() {
			t.Errorf("after the sweep the batch is %+v, want finished with then", in)
		}
		if got := callbacksRun(t, peer); got[driver.BatchThen] != 1 || got[driver.BatchFinally] != 1 || len(got) != 2 {
			t.Errorf("callbacks %v, want then and finally once", got)
		}
		reserveAll(t, peer, "bm", 0) // a second sweep finds nothing to do
		if got := callbacksRun(t, peer); len(got) != 0 {
			t.Errorf("a second sweep pushed %v, want nothing", got)
		}
		if n := outbox(t, peer, "bm"); n != 0 {
			t.Errorf("the outbox holds %d events after the sweep, want 0", n)
		}
	})
	t.Run("BetweenFinishAndResultRelease", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "events-applied")
		id, err := queue.DispatchBatch(t.Context(), killed, protoBatch(t, 2))
		if err != nil {
			t.Fatal(err)
		}
		ms := reserveAll(t, killed, "bm", 2)
		for _, j := range ms {
			c := driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Batch: id,
				Result: []byte(`1`), ResultUntil: time.Now().Add(time.Hour)}
			if err := testutil.Complete(t.Context(), killed, c); err != nil {
				t.Fatalf("Complete of a member: %v", err)
			}
		}
		rdb := client(t)
		pttl := func(id string) time.Duration {
			t.Helper()
			d, err := rdb.PTTL(t.Context(), "{"+peer.Prefix()+":bm}:r:"+id).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		// In between: the batch finished, its members' results are kept
		// without expiry, their release left in the batch's list.
		if in := getInfo(t, peer, id); !in.Finished() {
			t.Fatalf("in between the batch is %+v, want finished", in)
		}
		for _, j := range ms {
			if d := pttl(j.ID); d != -1 {
				t.Errorf("member %s's result has PTTL %v in between, want none (-1)", j.ID, d)
			}
		}
		reserveAll(t, peer, "bm", 0)
		for _, j := range ms {
			if d := pttl(j.ID); d <= 0 || d > time.Hour {
				t.Errorf("member %s's result has PTTL %v after the sweep, want its retention (up to an hour)", j.ID, d)
			}
		}
		if n := outbox(t, peer, "bm"); n != 0 {
			t.Errorf("the outbox holds %d events after the sweep, want 0", n)
		}
	})
	t.Run("BetweenCallbackPushAndMark", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "callback-pushed")
		id, err := queue.DispatchBatch(t.Context(), killed, protoBatch(t, 1))
		if err != nil {
			t.Fatal(err)
		}
		j := reserveAll(t, killed, "bm", 1)[0]
		if err := testutil.Complete(t.Context(), killed, driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Batch: id}); err != nil {
			t.Fatalf("Complete of a member: %v", err)
		}
		// In between: the batch is done and finished, then was pushed
		// but its mark not cleared; finally is marked, not pushed.
		in := getInfo(t, peer, id)
		wantCounts(t, "in between", in, 0, 1, 0, 0)
		if !in.Finished() || in.ThenAt.IsZero() {
			t.Errorf("in between the batch is %+v, want finished with then", in)
		}
		// The then callback runs and is gone before the retry: a push
		// without its guard would store it again.
		if got := callbacksRun(t, peer); got[driver.BatchThen] != 1 || len(got) != 1 {
			t.Fatalf("callbacks %v in between, want then alone", got)
		}
		reserveAll(t, peer, "bm", 0)
		if got := callbacksRun(t, peer); got[driver.BatchFinally] != 1 || len(got) != 1 {
			t.Errorf("callbacks %v after the sweep, want finally alone (then ran already)", got)
		}
		reserveAll(t, peer, "bm", 0)
		if got := callbacksRun(t, peer); len(got) != 0 {
			t.Errorf("a second sweep pushed %v, want nothing", got)
		}
		if n := outbox(t, peer, "bm"); n != 0 {
			t.Errorf("the outbox holds %d events after the sweep, want 0", n)
		}
	})
	t.Run("BetweenFailureAndMemberCancels", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "members-cancelled")
		id, err := queue.DispatchBatch(t.Context(), killed, protoBatch(t, 3))
		if err != nil {
			t.Fatal(err)
		}
		ms := reserveAll(t, killed, "bm", 3)
		if err := testutil.Complete(t.Context(), killed, driver.Completion{Lease: ms[0].Lease(), Outcome: driver.OutcomeFailed, Reason: "boom", Batch: id}); err != nil {
			t.Fatalf("Complete(failed) of a member: %v", err)
		}
		// In between: the failure cancelled the batch and its other
		// members' jobs (their leases are lost), which the batch still
		// counts pending; catch came, finally not yet.
		in := getInfo(t, peer, id)
		wantCounts(t, "in between", in, 2, 0, 1, 0)
		if in.CancelledAt.IsZero() || in.Finished() {
			t.Errorf("in between the batch is %+v, want cancelled, not finished", in)
		}
		if err := testutil.Ack(t.Context(), peer, ms[1].Lease()); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("Ack of a cancelled member in between: %v, want ErrLeaseLost", err)
		}
		if got := callbacksRun(t, peer); got[driver.BatchCatch] != 1 || len(got) != 1 {
			t.Errorf("callbacks %v in between, want catch alone", got)
		}
		reserveAll(t, peer, "bm", 0)
		in = getInfo(t, peer, id)
		wantCounts(t, "after the sweep", in, 0, 0, 1, 2)
		if !in.Finished() {
			t.Errorf("after the sweep the batch is %+v, want finished", in)
		}
		if got := callbacksRun(t, peer); got[driver.BatchFinally] != 1 || len(got) != 1 {
			t.Errorf("callbacks %v after the sweep, want finally alone", got)
		}
	})
	t.Run("BetweenCancelMarkAndMembers", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "batch-cancel-marked")
		id, err := queue.DispatchBatch(t.Context(), killed, protoBatch(t, 2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := killed.CancelBatch(t.Context(), id); !errors.Is(err, errKilled) {
			t.Fatalf("CancelBatch killed after its first step: %v", err)
		}
		// In between: the batch is cancelled (AddToBatch refuses it), its
		// members still wait.
		in := getInfo(t, peer, id)
		wantCounts(t, "in between", in, 2, 0, 0, 0)
		if in.CancelledAt.IsZero() {
			t.Errorf("in between the batch is %+v, want cancelled", in)
		}
		if n, _ := peer.Len(t.Context(), "bm"); n != 2 {
			t.Errorf("Len(bm) = %d in between, want 2", n)
		}
		if _, err := queue.AddToBatch(t.Context(), peer, id, protoBatch(t, 1).Jobs...); !errors.Is(err, queue.ErrBatchClosed) {
			t.Errorf("AddToBatch in between: %v, want ErrBatchClosed", err)
		}
		// CancelBatch again finishes what the first began.
		in, err = peer.CancelBatch(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		wantCounts(t, "after CancelBatch again", in, 0, 0, 0, 2)
		if n, _ := peer.Len(t.Context(), "bm"); n != 0 {
			t.Errorf("Len(bm) = %d after the cancel, want 0", n)
		}
		if got := callbacksRun(t, peer); got[driver.BatchFinally] != 1 || len(got) != 1 {
			t.Errorf("callbacks %v after the cancel, want finally alone", got)
		}
	})
	t.Run("BetweenRecordAndMembers", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "batch-created")
		b := protoBatch(t, 2)
		cbs, err := driver.EncodeCallbacks(nil, nil, b.Finally)
		if err != nil {
			t.Fatal(err)
		}
		rec := driver.BatchRecord{ID: driver.NewID(), Callbacks: cbs}
		for i := range b.Jobs {
			b.Jobs[i].Meta = map[string]string{queue.MetaBatch: rec.ID}
		}
		if _, err := killed.PushBatch(t.Context(), rec, b.Jobs); !errors.Is(err, errKilled) {
			t.Fatalf("PushBatch killed after its first step: %v", err)
		}
		// In between: the record counts its members pending, but none was
		// pushed and the batch is not listed yet.
		wantCounts(t, "in between", getInfo(t, peer, rec.ID), 2, 0, 0, 0)
		if n, _ := peer.Len(t.Context(), "bm"); n != 0 {
			t.Errorf("Len(bm) = %d in between, want 0", n)
		}
		if page, err := peer.ListBatches(t.Context(), driver.BatchFilter{}); err != nil || len(page.Batches) != 0 {
			t.Errorf("ListBatches in between = %+v, %v; want none", page, err)
		}
		// CancelBatch finishes the batch: its members, never pushed, count
		// as cancelled.
		in, err := peer.CancelBatch(t.Context(), rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantCounts(t, "after CancelBatch", in, 0, 0, 0, 2)
		if !in.Finished() {
			t.Errorf("after CancelBatch the batch is %+v, want finished", in)
		}
		if got := callbacksRun(t, peer); got[driver.BatchFinally] != 1 || len(got) != 1 {
			t.Errorf("callbacks %v after the cancel, want finally alone", got)
		}
	})
}

// TestBatchWorkersKilledSteps runs a batch of 300 members on three
// Workers, each on a client of its own as three processes would, one of
// which stops the batch protocol at every third step it runs (as if killed
// there, over and over). The others, and its own later reservations, finish
// what it leaves: every member is counted done once, and then and finally
// run once each.
func TestBatchWorkersKilledSteps(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	const n = 300
	var (
		mu    sync.Mutex
		ran   = map[int]int{}
		cbs   = map[driver.BatchEvent]int{}
		steps atomic.Int64
	)
	for i := range 3 {
		h := newQueue(t, client(t), p)
		redisqueue.SetSweepEvery(h, 20*time.Millisecond)
		if i == 0 {
			redisqueue.SetBatchHook(h, func(string) error {
				if steps.Add(1)%3 == 0 {
					return errKilled
				}
				return nil
			})
		}
		w := queue.NewWorker(h).Slog(slog.New(slog.DiscardHandler)).Queues("bm", "cb").Poll(20 * time.Millisecond).Concurrency(4)
		queue.Handle(w, func(ctx context.Context, m member) error {
			mu.Lock()
			ran[m.N]++
			mu.Unlock()
			return nil
		})
		queue.Handle(w, func(ctx context.Context, _ callback) error {
			j, _ := queue.JobFromContext(ctx)
			mu.Lock()
			cbs[driver.BatchEvent(j.Meta[queue.MetaBatchEvent])]++
			mu.Unlock()
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Worker.Run: %v", err)
			}
		})
	}
	q := newQueue(t, rdb, p)
	id, err := queue.DispatchBatch(t.Context(), q, protoBatch(t, n))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func() bool {
		in, err := q.GetBatch(t.Context(), id)
		mu.Lock()
		defer mu.Unlock()
		return err == nil && in.Done == n && cbs[driver.BatchThen] > 0 && cbs[driver.BatchFinally] > 0 &&
			outbox(t, q, "bm") == 0
	}, "the batch to finish and its callbacks to run")
	// Callbacks pushed by a sweep still running would show within a poll.
	testutil.Eventually(t, 10*time.Second, func() bool {
		n, err := q.Len(t.Context(), "")
		return err == nil && n == 0
	}, "the queues to drain")
	if k := steps.Load(); k < 3 {
		t.Errorf("the killed process ran %d steps: the test killed none", k)
	} else {
		t.Logf("the killed process was stopped at %d of its %d steps", k/3, k)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != n {
		t.Errorf("%d members ran, want %d", len(ran), n)
	}
	for m, c := range ran {
		if c != 1 {
			t.Errorf("member %d ran %d times, want once", m, c)
		}
	}
	if cbs[driver.BatchThen] != 1 || cbs[driver.BatchFinally] != 1 || cbs[driver.BatchCatch] != 0 {
		t.Errorf("callbacks ran %v, want then and finally once each", cbs)
	}
	wantCounts(t, "at the end", getInfo(t, q, id), 0, n, 0, 0)
}
