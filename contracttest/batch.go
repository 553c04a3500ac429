package contracttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// batchItem is the member job of the batch checks.
type batchItem struct{ N int }

// batchDone is the callback job of the batch checks.
type batchDone struct{}

// newBatch returns a batch of n members on queue "bm" (named jobs, as
// NewJob builds them) with then, catch and finally callbacks on queue
// "cb".
func newBatch(t *testing.T, n int, allowFailures bool) queue.Batch {
	t.Helper()
	b := queue.Batch{Name: "contract", AllowFailures: allowFailures}
	for i := range n {
		j, err := queue.NewJob(batchItem{i}, queue.OnQueue("bm"))
		if err != nil {
			t.Fatal(err)
		}
		b.Jobs = append(b.Jobs, j)
	}
	for _, cb := range []**queue.Job{&b.Then, &b.Catch, &b.Finally} {
		j, err := queue.NewJob(batchDone{}, queue.OnQueue("cb"))
		if err != nil {
			t.Fatal(err)
		}
		*cb = &j
	}
	return b
}

// callbacks reserves every callback job on queue "cb" and returns them by
// batch and event.
func callbacks(t *testing.T, q queue.Queue) map[string]map[driver.BatchEvent][]queue.Job {
	t.Helper()
	out := map[string]map[driver.BatchEvent][]queue.Job{}
	for {
		jobs := reserve(t, q, []string{"cb"}, 100, longLease)
		if len(jobs) == 0 {
			return out
		}
		for _, j := range jobs {
			id := j.Meta[queue.MetaBatchOf]
			if out[id] == nil {
				out[id] = map[driver.BatchEvent][]queue.Job{}
			}
			ev := driver.BatchEvent(j.Meta[queue.MetaBatchEvent])
			out[id][ev] = append(out[id][ev], j)
		}
	}
}

// wantCallbacks fails unless batch id's callbacks are exactly want, once
// each.
func wantCallbacks(t *testing.T, got map[string]map[driver.BatchEvent][]queue.Job, id string, want ...driver.BatchEvent) {
	t.Helper()
	for _, ev := range []driver.BatchEvent{driver.BatchThen, driver.BatchCatch, driver.BatchFinally} {
		n, w := len(got[id][ev]), 0
		if slices.Contains(want, ev) {
			w = 1
		}
		if n != w {
			t.Errorf("batch %s: %d %s callbacks pushed, want %d", id, n, ev, w)
		}
	}
}

// getBatch reads batch id and fails on error.
func getBatch(t *testing.T, b driver.Workflows, id string) driver.BatchInfo {
	t.Helper()
	info, err := b.GetBatch(t.Context(), id)
	if err != nil {
		t.Fatalf("GetBatch(%s): %v", id, err)
	}
	return info
}

// wantBatch fails unless info's counters are total, pending, done, failed,
// cancelled.
func wantBatch(t *testing.T, what string, info driver.BatchInfo, total, pending, done, failed, cancelled int) {
	t.Helper()
	got := []int{info.Total, info.Pending, info.Done, info.Failed, info.Cancelled}
	if want := []int{total, pending, done, failed, cancelled}; !slices.Equal(got, want) {
		t.Errorf("%s: batch total, pending, done, failed, cancelled = %v, want %v", what, got, want)
	}
}

// reserveMembers reserves n members of queue "bm" and returns them by ID.
func reserveMembers(t *testing.T, q queue.Queue, n int) map[string]queue.Job {
	t.Helper()
	jobs := reserve(t, q, []string{"bm"}, n, longLease)
	if len(jobs) != n {
		t.Fatalf("reserved %d members, want %d", len(jobs), n)
	}
	out := make(map[string]queue.Job, n)
	for _, j := range jobs {
		out[j.ID] = j
	}
	return out
}

// finishMember records outcome o of the member under l in batch through
// Complete, and returns its answer.
func finishMember(ctx context.Context, q queue.Queue, l driver.Lease, batch string, o driver.Outcome, reason string) error {
	return completeOne(ctx, q, driver.Completion{Lease: l, Outcome: o, Reason: reason, Batch: batch})
}

// finish records outcome o of member j.
func finish(t *testing.T, q queue.Queue, j queue.Job, o driver.Outcome, reason string) {
	t.Helper()
	if err := finishMember(t.Context(), q, j.Lease(), queue.BatchOf(&j), o, reason); err != nil {
		t.Fatalf("Complete(%s) of member %s: %v", o, j.ID, err)
	}
}

// twoHandles returns q and a second handle: another process's where the
// store is shared (Harness.Peer), q again where not.
func (s *suite) twoHandles(t *testing.T, q queue.Queue) []queue.Queue {
	hs := []queue.Queue{q, q}
	if s.h.Peer != nil {
		hs[1] = s.h.Peer(t, q)
	}
	return hs
}

// finishAtOnce dispatches a batch of size members, reserves two and
// records outcome o for both at the same instant, each through one of
// handles. It returns the batch's ID and the two calls' errors.
func finishAtOnce(t *testing.T, q queue.Queue, handles []queue.Queue, size int, o driver.Outcome) (string, []error) {
	t.Helper()
	id, err := queue.DispatchBatch(t.Context(), q, newBatch(t, size, false))
	if err != nil {
		t.Fatalf("DispatchBatch: %v", err)
	}
	var js []queue.Job
	for _, j := range reserveMembers(t, q, 2) {
		js = append(js, j)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 2)
	for i, h := range handles {
		wg.Go(func() {
			<-start
			errs[i] = finishMember(context.WithoutCancel(t.Context()), h, js[i].Lease(), id, o, fmt.Sprint("failure ", i))
		})
	}
	close(start)
	wg.Wait()
	return id, errs
}

// testBatches checks batches (queue.Batch, driver.Workflows): progress kept in
// the store, then / catch / finally exactly once, allowFailures, adding to
// and cancelling a batch, atomic dispatch in a transaction, and members
// finishing at once on several processes.
func (s *suite) testBatches(t *testing.T) {
	checkAs(s, t, "ThenFinallyOnce", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		bt := newBatch(t, 3, false)
		id, err := queue.DispatchBatch(t.Context(), q, bt)
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		info := getBatch(t, b, id)
		wantBatch(t, "after dispatch", info, 3, 3, 0, 0, 0)
		if info.Name != "contract" || info.CreatedAt.IsZero() || info.Finished() {
			t.Errorf("after dispatch the batch is %+v, want its name, a creation time and not finished", info)
		}
		m := reserveMembers(t, q, 3)
		for _, j := range m {
			if got := queue.BatchOf(&j); got != id {
				t.Fatalf("member %s carries batch %q, want %s", j.ID, got, id)
			}
		}
		i := 0
		for _, j := range m {
			finish(t, q, j, driver.OutcomeDone, "")
			if i++; i < 3 {
				if cb := callbacks(t, q); len(cb) != 0 {
					t.Fatalf("after %d of 3 members, callbacks %v were pushed", i, cb)
				}
			}
		}
		info = getBatch(t, b, id)
		wantBatch(t, "after every member succeeded", info, 3, 0, 3, 0, 0)
		if !info.Finished() || info.ThenAt.IsZero() || !info.CatchAt.IsZero() || info.Progress() != 100 {
			t.Errorf("after every member succeeded the batch is %+v, want finished, then due, no catch", info)
		}
		cb := callbacks(t, q)
		wantCallbacks(t, cb, id, driver.BatchThen, driver.BatchFinally)
		if got := cb[id][driver.BatchThen]; len(got) == 1 && got[0].ID != bt.Then.ID {
			t.Errorf("the then job is %s, want the batch's %s", got[0].ID, bt.Then.ID)
		}
		for _, j := range m {
			if err := finishMember(t.Context(), q, j.Lease(), id, driver.OutcomeDone, ""); !errors.Is(err, queue.ErrLeaseLost) {
				t.Errorf("Complete of a member finished already: %v, want ErrLeaseLost", err)
			}
		}
		wantBatch(t, "after finishing members again", getBatch(t, b, id), 3, 0, 3, 0, 0)
		wantLen(t, q, "bm", 0)
	})
	checkAs(s, t, "FailureCancels", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		id, err := queue.DispatchBatch(t.Context(), q, newBatch(t, 4, false))
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		m := reserveMembers(t, q, 2) // two run, two wait
		var first, second queue.Job
		for _, j := range m {
			if first.ID == "" {
				first = j
			} else {
				second = j
			}
		}
		finish(t, q, first, driver.OutcomeFailed, "boom")
		info := getBatch(t, b, id)
		wantBatch(t, "after the first failure", info, 4, 0, 0, 1, 3)
		if info.CancelledAt.IsZero() || !info.Finished() || info.CatchAt.IsZero() || !info.ThenAt.IsZero() {
			t.Errorf("after the first failure the batch is %+v, want cancelled, finished, catch due, no then", info)
		}
		cb := callbacks(t, q)
		wantCallbacks(t, cb, id, driver.BatchCatch, driver.BatchFinally)
		if c := cb[id][driver.BatchCatch]; len(c) == 1 && (c[0].Meta[queue.MetaBatchFailed] != first.ID || c[0].Meta[queue.MetaBatchError] != "boom") {
			t.Errorf("the catch job's meta %v, want the failed member %s and its error", c[0].Meta, first.ID)
		}
		wantLen(t, q, "bm", 0) // the waiting members were cancelled
		if err := finishMember(t.Context(), q, second.Lease(), id, driver.OutcomeDone, ""); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("Complete of a running member of a cancelled batch: %v, want ErrLeaseLost", err)
		}
		if dead := deadLetters(t, q, "bm", 10); len(dead) != 1 || dead[0].ID != first.ID {
			t.Errorf("dead letters %v, want the failed member %s", ids(dead), first.ID)
		}
		if in := inspector(q); in != nil && s.h.Caps.NoAttemptHistory == "" {
			// The member's failed attempt is in its history, as Fail
			// records it.
			info, err := in.GetJob(t.Context(), first.ID)
			if err != nil || len(info.History) != 1 || info.History[0].Error != "boom" {
				t.Errorf("the failed member's history = %+v, %v; want its attempt with error boom", info.History, err)
			}
		}
		if _, err := queue.AddToBatch(t.Context(), q, id, newBatch(t, 1, false).Jobs...); !errors.Is(err, queue.ErrBatchClosed) {
			t.Errorf("AddToBatch to a cancelled batch: %v, want ErrBatchClosed", err)
		}
	})
	checkAs(s, t, "AllowFailures", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		id, err := queue.DispatchBatch(t.Context(), q, newBatch(t, 3, true))
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		var ms []queue.Job
		for _, j := range reserveMembers(t, q, 3) {
			ms = append(ms, j)
		}
		finish(t, q, ms[0], driver.OutcomeFailed, "first")
		finish(t, q, ms[1], driver.OutcomeFailed, "second")
		info := getBatch(t, b, id)
		wantBatch(t, "after two failures", info, 3, 1, 0, 2, 0)
		if !info.CancelledAt.IsZero() || info.Finished() {
			t.Errorf("with AllowFailures two failures left the batch %+v, want it running", info)
		}
		cb := callbacks(t, q)
		wantCallbacks(t, cb, id, driver.BatchCatch)
		if c := cb[id][driver.BatchCatch]; len(c) == 1 && c[0].Meta[queue.MetaBatchFailed] != ms[0].ID {
			t.Errorf("the catch job names member %s, want the first failure %s", c[0].Meta[queue.MetaBatchFailed], ms[0].ID)
		}
		finish(t, q, ms[2], driver.OutcomeDone, "")
		wantBatch(t, "after the last member", getBatch(t, b, id), 3, 0, 1, 2, 0)
		wantCallbacks(t, callbacks(t, q), id, driver.BatchFinally)
		// A failed member retried and done completes the batch: then
		// comes once; finally and catch came already.
		if err := q.RetryDead(t.Context(), ms[0].ID); err != nil {
			t.Fatalf("RetryDead: %v", err)
		}
		r := reserveOne(t, q, "bm", ms[0].ID, longLease)
		finish(t, q, r, driver.OutcomeDone, "")
		wantBatch(t, "after a retried member succeeded", getBatch(t, b, id), 3, 0, 2, 1, 0)
		wantCallbacks(t, callbacks(t, q), id)
		if err := q.RetryDead(t.Context(), ms[1].ID); err != nil {
			t.Fatalf("RetryDead: %v", err)
		}
		r = reserveOne(t, q, "bm", ms[1].ID, longLease)
		finish(t, q, r, driver.OutcomeDone, "")
		info = getBatch(t, b, id)
		wantBatch(t, "after every retried member succeeded", info, 3, 0, 3, 0, 0)
		if info.ThenAt.IsZero() {
			t.Errorf("every member succeeded in the end but then is not due: %+v", info)
		}
		wantCallbacks(t, callbacks(t, q), id, driver.BatchThen)
	})
	checkAs(s, t, "AddAndCancel", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		id, err := queue.DispatchBatch(t.Context(), q, newBatch(t, 2, false))
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		more := newBatch(t, 2, false).Jobs
		if n, err := queue.AddToBatch(t.Context(), q, id, more...); err != nil || n != 2 {
			t.Fatalf("AddToBatch = %d, %v; want 2, nil", n, err)
		}
		if _, err := queue.AddToBatch(t.Context(), q, "no such batch", newBatch(t, 1, false).Jobs...); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("AddToBatch to an unknown batch: %v, want ErrNotFound", err)
		}
		wantBatch(t, "after adding two", getBatch(t, b, id), 4, 4, 0, 0, 0)
		m := reserveMembers(t, q, 2)
		var done, running queue.Job
		for _, j := range m {
			if done.ID == "" {
				done = j
			} else {
				running = j
			}
		}
		finish(t, q, done, driver.OutcomeDone, "")
		info, err := b.CancelBatch(t.Context(), id)
		if err != nil {
			t.Fatalf("CancelBatch: %v", err)
		}
		wantBatch(t, "after the cancel", info, 4, 0, 1, 0, 3)
		if info.CancelledAt.IsZero() || !info.Finished() {
			t.Errorf("after the cancel the batch is %+v, want cancelled and finished", info)
		}
		wantCallbacks(t, callbacks(t, q), id, driver.BatchFinally)
		wantLen(t, q, "bm", 0)
		if err := finishMember(t.Context(), q, running.Lease(), id, driver.OutcomeDone, ""); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("Complete of a member running when its batch was cancelled: %v, want ErrLeaseLost", err)
		}
		again, err := b.CancelBatch(t.Context(), id)
		if err != nil || again != info {
			t.Errorf("CancelBatch again = %+v, %v; want %+v unchanged", again, err, info)
		}
		wantCallbacks(t, callbacks(t, q), id)
		if _, err := b.CancelBatch(t.Context(), "no such batch"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("CancelBatch of an unknown batch: %v, want ErrNotFound", err)
		}
		first, err := b.BatchMembers(t.Context(), id, driver.MemberFilter{Limit: 3})
		if err != nil || len(first.Members) != 3 || first.Next == "" {
			t.Fatalf("BatchMembers(limit 3) = %+v, %v; want 3 members and a next page", first, err)
		}
		rest, err := b.BatchMembers(t.Context(), id, driver.MemberFilter{Limit: 3, After: first.Next})
		if err != nil || len(rest.Members) != 1 || rest.Next != "" {
			t.Fatalf("BatchMembers(after %s) = %+v, %v; want the last member", first.Next, rest, err)
		}
		members := append(first.Members, rest.Members...)
		if dn, err := b.BatchMembers(t.Context(), id, driver.MemberFilter{State: driver.MemberDone}); err != nil || len(dn.Members) != 1 || dn.Members[0].JobID != done.ID {
			t.Errorf("BatchMembers(state done) = %+v, %v; want member %s alone", dn, err, done.ID)
		}
		if _, err := b.BatchMembers(t.Context(), "no such batch", driver.MemberFilter{}); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("BatchMembers of an unknown batch: %v, want ErrNotFound", err)
		}
		states := map[driver.BatchMemberState]int{}
		for _, mb := range members {
			states[mb.State]++
			if mb.JobID == done.ID && mb.State != driver.MemberDone {
				t.Errorf("member %s is %s, want done", mb.JobID, mb.State)
			}
		}
		if states[driver.MemberDone] != 1 || states[driver.MemberCancelled] != 3 {
			t.Errorf("member states %v, want 1 done and 3 cancelled", states)
		}
	})
	checkAs(s, t, "CancelJobCounts", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		// A member cancelled on its own (the dashboard's cancel button)
		// counts as cancelled: the batch still finishes.
		if controller(q) == nil {
			t.Skip(lacks(q, "Controller"))
		}
		bt := newBatch(t, 2, false)
		id, err := queue.DispatchBatch(t.Context(), q, bt)
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		if _, err := queue.CancelJob(t.Context(), q, bt.Jobs[0].ID); err != nil {
			t.Fatalf("CancelJob of a member: %v", err)
		}
		wantBatch(t, "after cancelling a member", getBatch(t, b, id), 2, 1, 0, 0, 1)
		finish(t, q, reserveOne(t, q, "bm", bt.Jobs[1].ID, longLease), driver.OutcomeDone, "")
		info := getBatch(t, b, id)
		wantBatch(t, "after the other member", info, 2, 0, 1, 0, 1)
		if !info.Finished() || !info.ThenAt.IsZero() {
			t.Errorf("the batch is %+v, want finished without then", info)
		}
		wantCallbacks(t, callbacks(t, q), id, driver.BatchFinally)
	})
	checkAs(s, t, "PurgeAndBulkCancelCount", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		// Members removed by a bulk cancel or by Purge count as cancelled
		// in their batch, whose Finally then comes: otherwise the batch
		// would wait for them forever.
		bt := newBatch(t, 3, false)
		id, err := queue.DispatchBatch(t.Context(), q, bt)
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		cancelled := 0
		if ba := controller(q); ba != nil {
			n, err := ba.ActOn(t.Context(), driver.JobFilter{State: queue.StateReady, Queue: "bm"}, driver.BulkCancel, 1, driver.Action{})
			if err != nil || n != 1 {
				t.Fatalf("ActOn(cancel, limit 1) = %d, %v; want 1, nil", n, err)
			}
			cancelled = 1
			wantBatch(t, "after a bulk cancel of one member", getBatch(t, b, id), 3, 2, 0, 0, 1)
		}
		n, err := q.Purge(t.Context(), "bm")
		if err != nil || n != 3-cancelled {
			t.Fatalf("Purge(bm) = %d, %v; want %d, nil", n, err, 3-cancelled)
		}
		info := getBatch(t, b, id)
		wantBatch(t, "after purging the rest", info, 3, 0, 0, 0, 3)
		if !info.Finished() || !info.ThenAt.IsZero() {
			t.Errorf("the batch is %+v, want finished without then", info)
		}
		wantCallbacks(t, callbacks(t, q), id, driver.BatchFinally)
	})
	checkAs(s, t, "List", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		var want []string
		for range 5 {
			id, err := queue.DispatchBatch(t.Context(), q, newBatch(t, 1, false))
			if err != nil {
				t.Fatalf("DispatchBatch: %v", err)
			}
			want = append([]string{id}, want...) // newest first
		}
		var got []string
		for after := ""; ; {
			page, err := b.ListBatches(t.Context(), driver.BatchFilter{Limit: 2, After: after})
			if err != nil {
				t.Fatalf("ListBatches: %v", err)
			}
			if len(page.Batches) > 2 {
				t.Fatalf("ListBatches(limit 2) returned %d", len(page.Batches))
			}
			for _, in := range page.Batches {
				got = append(got, in.ID)
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		if !slices.Equal(got, want) {
			t.Errorf("ListBatches pages = %v, want %v (newest first)", got, want)
		}
		if _, err := b.ListBatches(t.Context(), driver.BatchFilter{Limit: driver.MaxBatchPage + 1}); !errors.Is(err, queue.ErrBatch) {
			t.Errorf("ListBatches over the page cap: %v, want ErrBatch", err)
		}
	})
	checkAs(s, t, "Invalid", func(t *testing.T, q queue.Queue, _ driver.Workflows) {
		bt := newBatch(t, 2, false)
		bt.Jobs[1].UniqueKey = "k"
		if _, err := queue.DispatchBatch(t.Context(), q, bt); !errors.Is(err, queue.ErrBatch) {
			t.Errorf("a batch member with a unique key: %v, want ErrBatch", err)
		}
		if _, err := queue.DispatchBatch(t.Context(), q, queue.Batch{}); !errors.Is(err, queue.ErrBatch) {
			t.Errorf("a batch without jobs: %v, want ErrBatch", err)
		}
		wantLen(t, q, "", 0)
	})
	if s.h.Tx != nil {
		checkAs(s, t, "AtomicInTx", func(t *testing.T, q queue.Queue, b driver.Workflows) {
			p, _, rollback := s.h.Tx(t, q)
			id, err := queue.DispatchBatch(t.Context(), p, newBatch(t, 3, false))
			if err != nil {
				t.Fatalf("DispatchBatch in a transaction: %v", err)
			}
			if err := rollback(); err != nil {
				t.Fatal(err)
			}
			wantLen(t, q, "bm", 0)
			if _, err := b.GetBatch(t.Context(), id); !errors.Is(err, queue.ErrNotFound) {
				t.Errorf("GetBatch of a batch rolled back: %v, want ErrNotFound", err)
			}
			p, commit, _ := s.h.Tx(t, q)
			id, err = queue.DispatchBatch(t.Context(), p, newBatch(t, 3, false))
			if err != nil {
				t.Fatalf("DispatchBatch in a transaction: %v", err)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			wantBatch(t, "after commit", getBatch(t, b, id), 3, 3, 0, 0, 0)
			wantLen(t, q, "bm", 3)
		})
	}
	checkAs(s, t, "ConcurrentFinish", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		// Two members of each batch finish at the same instant through two
		// handles (two processes on a shared store): then and finally are
		// pushed once per batch, never twice, never not at all.
		hs := s.twoHandles(t, q)
		for range 20 {
			id, errs := finishAtOnce(t, q, hs, 2, driver.OutcomeDone)
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("Complete at once: %v", err)
			}
			wantBatch(t, fmt.Sprintf("batch %s", id), getBatch(t, b, id), 2, 0, 2, 0, 0)
			wantCallbacks(t, callbacks(t, q), id, driver.BatchThen, driver.BatchFinally)
		}
	})
	checkAs(s, t, "ConcurrentFailures", func(t *testing.T, q queue.Queue, b driver.Workflows) {
		// Two running members of each batch of four are dead-lettered at
		// the same instant through two handles, without AllowFailures. A
		// failure cancels the members not yet finished: the other running
		// one is either counted failed too (its failure came first) or
		// cancelled (its failure then finds its lease lost). Either way
		// every member is counted once, and catch and finally come once.
		hs := s.twoHandles(t, q)
		for range 10 {
			id, errs := finishAtOnce(t, q, hs, 4, driver.OutcomeFailed)
			lost := 0
			for _, err := range errs {
				switch {
				case errors.Is(err, queue.ErrLeaseLost):
					lost++
				case err != nil:
					t.Fatalf("Complete(failed) at once: %v", err)
				}
			}
			if lost > 1 {
				t.Fatalf("both failures at once found their lease lost (%v): neither was recorded", errs)
			}
			wantBatch(t, fmt.Sprintf("batch %s", id), getBatch(t, b, id), 4, 0, 0, 2-lost, 2+lost)
			wantCallbacks(t, callbacks(t, q), id, driver.BatchCatch, driver.BatchFinally)
		}
	})
	checkAs(s, t, "Workers", func(t *testing.T, q queue.Queue, _ driver.Workflows) {
		// Three Workers (on three processes where the store is shared)
		// run a batch; each member and each callback runs once. A store
		// in one process (memory) gets the 1,000 members; the
		// shared stores 50, since sqlqueue's TestBatchAcrossProcesses
		// runs their 1,000 on three real processes.
		var mu sync.Mutex
		ran := map[int]int{}
		cbs := map[driver.BatchEvent]int{}
		// Every handle is opened before any Worker starts, so the Workers
		// stop (cleanups run last first) before a handle's cleanup.
		for _, h := range s.processes(t, q, 3) {
			w := queue.NewWorker(h).Slog(quiet).Queues("bm", "cb").Poll(pollEvery).Concurrency(4)
			queue.Handle(w, func(ctx context.Context, it batchItem) error {
				mu.Lock()
				ran[it.N]++
				mu.Unlock()
				return nil
			})
			queue.Handle(w, func(ctx context.Context, _ batchDone) error {
				j, _ := queue.JobFromContext(ctx)
				mu.Lock()
				cbs[driver.BatchEvent(j.Meta[queue.MetaBatchEvent])]++
				mu.Unlock()
				return nil
			})
			runWorker(t, w)
		}
		n := 50
		if s.h.Peer == nil {
			n = 1000
		}
		id, err := queue.DispatchBatch(t.Context(), q, newBatch(t, n, false))
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		eventually(t, "the then and finally callbacks to run", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return cbs[driver.BatchThen] > 0 && cbs[driver.BatchFinally] > 0
		})
		eventually(t, "the queues to drain", func() bool { return length(t, q, "") == 0 })
		mu.Lock()
		defer mu.Unlock()
		if len(ran) != n {
			t.Errorf("%d members ran, want %d", len(ran), n)
		}
		for m, c := range ran {
			if c != 1 {
				t.Errorf("member %d ran %d times without any crash, want once", m, c)
			}
		}
		if cbs[driver.BatchThen] != 1 || cbs[driver.BatchFinally] != 1 || cbs[driver.BatchCatch] != 0 {
			t.Errorf("callbacks ran %v, want then and finally once each", cbs)
		}
		wantBatch(t, "after the workers", getBatch(t, workflows(q), id), n, 0, n, 0, 0)
	})
}
