package contracttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// testBulkActor checks acting on every job a filter selects.
func (s *suite) testBulkActor(t *testing.T) {
	count := func(t *testing.T, b driver.Controller, f driver.JobFilter, limit int) driver.Count {
		t.Helper()
		c, err := b.CountJobs(t.Context(), f, limit)
		if err != nil {
			t.Fatalf("CountJobs(%+v, %d): %v", f, limit, err)
		}
		return c
	}
	act := func(t *testing.T, b driver.Controller, f driver.JobFilter, a driver.BulkAction, limit, want int) {
		t.Helper()
		n, err := b.ActOn(t.Context(), f, a, limit, driver.Action{})
		if err != nil || n != want {
			t.Fatalf("ActOn(%+v, %s, %d) = %d, %v; want %d, nil", f, a, limit, n, err, want)
		}
	}
	dead := func(t *testing.T, q queue.Queue, queueName, name string, payload string) queue.Job {
		t.Helper()
		j := newJob(queueName)
		j.Name = name
		if payload != "" {
			j.Payload = []byte(payload)
		}
		push(t, q, j)
		fail(t, q, reserveOne(t, q, queueName, j.ID, longLease), "bulk test")
		return j
	}

	checkAs(s, t, "RetryRecords", func(t *testing.T, q queue.Queue, b driver.Controller) {
		// A bulk retry given an action records it in each job it moved,
		// and in no other; without one it records nothing.
		a, c := dead(t, q, "bk-rec", "A", ""), dead(t, q, "bk-rec", "A", "")
		other := dead(t, q, "bk-rec-other", "A", "")
		n, err := b.ActOn(t.Context(), driver.JobFilter{State: queue.StateDead, Queue: "bk-rec"}, driver.BulkRetry, 100,
			driver.Action{By: "ops", What: "bulk retried"})
		if err != nil || n != 2 {
			t.Fatalf("ActOn(retry, with an action) = %d, %v; want 2", n, err)
		}
		wantActions(t, q, a.ID, "bulk retried")
		wantActions(t, q, c.ID, "bulk retried")
		wantActions(t, q, other.ID)
		act(t, b, driver.JobFilter{State: queue.StateDead, Queue: "bk-rec-other"}, driver.BulkRetry, 100, 1)
		wantActions(t, q, other.ID)
	})
	checkAs(s, t, "CountAndAct", func(t *testing.T, q queue.Queue, b driver.Controller) {
		for range 3 {
			dead(t, q, "bk", "A", "")
			dead(t, q, "bk", "B", `{"needle":1}`)
		}
		other := dead(t, q, "bk-other", "A", "")
		deadBk := driver.JobFilter{State: queue.StateDead, Queue: "bk"}
		counts := []struct {
			f     driver.JobFilter
			limit int
			want  driver.Count
		}{
			{deadBk, 100, driver.Count{N: 6}},
			{deadBk, 6, driver.Count{N: 6}},
			{deadBk, 4, driver.Count{N: 4, More: true}},
			{driver.JobFilter{State: queue.StateDead, Queue: "bk", Name: "A"}, 100, driver.Count{N: 3}},
			{driver.JobFilter{State: queue.StateDead, Search: "needle"}, 100, driver.Count{N: 3}},
			{driver.JobFilter{State: queue.StateDead}, 100, driver.Count{N: 7}},
			{driver.JobFilter{State: queue.StateReady, Queue: "bk"}, 100, driver.Count{}},
		}
		for _, c := range counts {
			if got := count(t, b, c.f, c.limit); got != c.want {
				t.Errorf("CountJobs(%+v, %d) = %+v, want %+v", c.f, c.limit, got, c.want)
			}
		}

		// Retry two of the three dead A jobs of bk: the limit holds.
		act(t, b, driver.JobFilter{State: queue.StateDead, Queue: "bk", Name: "A"}, driver.BulkRetry, 2, 2)
		if got := count(t, b, driver.JobFilter{State: queue.StateDead, Queue: "bk", Name: "A"}, 100); got.N != 1 {
			t.Fatalf("dead A jobs of bk after retrying 2 of 3: %d, want 1", got.N)
		}
		retried := reserve(t, q, []string{"bk"}, 10, longLease)
		if len(retried) != 2 {
			t.Fatalf("reserved %d retried jobs, want 2", len(retried))
		}
		for _, j := range retried {
			if j.Attempts != 1 {
				t.Errorf("retried job %s reserved with Attempts %d, want 1 (reset by the retry)", j.ID, j.Attempts)
			}
			ack(t, q, j)
		}

		// Forget every payload match, then the rest of bk; bk-other stays.
		act(t, b, driver.JobFilter{State: queue.StateDead, Queue: "bk", Search: "needle"}, driver.BulkForget, 100, 3)
		act(t, b, deadBk, driver.BulkForget, 100, 1)
		if got := count(t, b, deadBk, 100); got.N != 0 {
			t.Fatalf("dead jobs of bk after forgetting all: %d, want 0", got.N)
		}
		if got := deadLetters(t, q, "bk-other", 10); len(got) != 1 || got[0].ID != other.ID {
			t.Fatalf("dead letters of bk-other = %v, want only %s: a filtered forget touched another queue", ids(got), other.ID)
		}

		// Nothing left to act on is not an error.
		act(t, b, deadBk, driver.BulkForget, 100, 0)

		// An action on a state it does not act on changes nothing.
		for _, c := range []struct {
			a  driver.BulkAction
			st driver.JobState
		}{{driver.BulkRetry, queue.StateReady}, {driver.BulkForget, queue.StateRunning}, {driver.BulkCancel, queue.StateDead}} {
			n, err := b.ActOn(t.Context(), driver.JobFilter{State: c.st}, c.a, 100, driver.Action{})
			wantErr(t, "ActOn("+string(c.a)+" on "+string(c.st)+" jobs)", err, queue.ErrBulkState)
			if n != 0 {
				t.Errorf("ActOn(%s on %s jobs) changed %d jobs", c.a, c.st, n)
			}
		}
		if got := deadLetters(t, q, "bk-other", 10); len(got) != 1 {
			t.Fatalf("dead letters of bk-other after refused actions: %d, want 1", len(got))
		}
	})

	checkAs(s, t, "Cancel", func(t *testing.T, q queue.Queue, b driver.Controller) {
		if controller(q) == nil {
			t.Skip(lacks(q, "Controller"))
		}
		pushN(t, q, "bkc", 5)
		keep := pushN(t, q, "bkc-other", 1)[0]
		running := reserve(t, q, []string{"bkc"}, 2, longLease)
		if len(running) != 2 {
			t.Fatalf("reserved %d, want 2", len(running))
		}
		hold(t, q, running...)
		act(t, b, driver.JobFilter{State: queue.StateReady, Queue: "bkc"}, driver.BulkCancel, 100, 3)
		act(t, b, driver.JobFilter{State: queue.StateRunning, Queue: "bkc"}, driver.BulkCancel, 1, 1)
		for _, st := range []driver.JobState{queue.StateReady, queue.StateRunning} {
			want := int64(0)
			if st == queue.StateRunning {
				want = 1
			}
			if got := count(t, b, driver.JobFilter{State: st, Queue: "bkc"}, 100); got.N != want {
				t.Errorf("%s jobs of bkc after the cancels: %d, want %d", st, got.N, want)
			}
		}
		// The cancelled running job's lease is lost; the other still holds.
		var lost int
		for _, j := range running {
			if err := ackLease(t.Context(), q, j.Lease()); err != nil {
				wantErr(t, "Ack of a job cancelled while running", err, queue.ErrLeaseLost)
				lost++
			}
		}
		if lost != 1 {
			t.Errorf("%d of the 2 running jobs lost their lease, want 1 (the one cancelled)", lost)
		}
		reserveOne(t, q, "bkc-other", keep.ID, longLease)
	})

	checkAs(s, t, "RetrySkipsHeldUniqueKey", func(t *testing.T, q queue.Queue, b driver.Controller) {
		j := newJob("bku")
		j.UniqueKey = "held-" + j.ID
		push(t, q, j)
		fail(t, q, reserveOne(t, q, "bku", j.ID, longLease), "bulk test")
		dead(t, q, "bku", "contract", "")
		// An active job takes the dead letter's key.
		holder := newJob("bku")
		holder.UniqueKey = j.UniqueKey
		push(t, q, holder)
		act(t, b, driver.JobFilter{State: queue.StateDead, Queue: "bku"}, driver.BulkRetry, 100, 1)
		got := deadLetters(t, q, "bku", 10)
		if len(got) != 1 || got[0].ID != j.ID {
			t.Fatalf("dead letters after the bulk retry = %v, want only %s (its key is held)", ids(got), j.ID)
		}
	})
}

// testAttemptHistory checks the attempt history GetJob reports.
func (s *suite) testAttemptHistory(t *testing.T) {
	if s.h.Caps.NoAttemptHistory != "" {
		t.Skip(s.h.Caps.NoAttemptHistory)
	}
	checkAs(s, t, "FailedAttempts", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		j := newJob("hist")
		push(t, q, j)
		begin := time.Now()
		var last queue.Job
		for i, w := range []string{"worker-a", "worker-b", ""} {
			ctx := t.Context()
			if w != "" {
				ctx = driver.WithWorker(ctx, w)
			}
			got, err := q.Reserve(ctx, []string{"hist"}, 1, longLease)
			if err != nil || len(got) != 1 {
				t.Fatalf("Reserve %d = %d jobs, %v", i+1, len(got), err)
			}
			last = got[0]
			if i < 2 {
				if err := nackLease(t.Context(), q, last.Lease(), time.Time{}, fmt.Sprintf("failure %d", i+1)); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The third attempt runs: StartedAt and Worker are its own, and it
		// is not in the history yet.
		info, err := in.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.StartedAt.Before(begin.Add(-s.tol)) || info.Worker != "" {
			t.Errorf("running job: StartedAt %v (began %v), Worker %q; want its third attempt's start and no worker", info.StartedAt, begin, info.Worker)
		}
		fail(t, q, last, "failure 3")
		info, err = in.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := []driver.Attempt{{Attempt: 1, Error: "failure 1", Worker: "worker-a"}, {Attempt: 2, Error: "failure 2", Worker: "worker-b"}, {Attempt: 3, Error: "failure 3"}}
		if len(info.History) != len(want) {
			t.Fatalf("History = %+v, want %d attempts", info.History, len(want))
		}
		prev := begin.Add(-s.tol)
		for i, a := range info.History {
			if a.Attempt != want[i].Attempt || a.Error != want[i].Error || a.Worker != want[i].Worker {
				t.Errorf("History[%d] = %+v, want attempt %d, error %q, worker %q", i, a, want[i].Attempt, want[i].Error, want[i].Worker)
			}
			if a.Started.Before(prev) || a.Runtime < 0 || a.Started.After(time.Now().Add(s.tol)) {
				t.Errorf("History[%d] started %v (after %v?), runtime %v", i, a.Started, prev, a.Runtime)
			}
			prev = a.Started.Add(-s.tol)
		}
		// Listing does not carry the history.
		page, err := in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateDead, Queue: "hist"})
		if err != nil || len(page.Jobs) != 1 || page.Jobs[0].History != nil {
			t.Errorf("ListJobs(dead) = %d jobs, %v; want 1 without History", len(page.Jobs), err)
		}
	})

	checkAs(s, t, "Bounded", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		j := newJob("hist-many")
		j.MaxAttempts = 100
		push(t, q, j)
		const n = driver.MaxHistory + 5
		for i := range n {
			got := reserve(t, q, []string{"hist-many"}, 1, longLease)
			if len(got) != 1 {
				t.Fatalf("Reserve %d: %d jobs", i+1, len(got))
			}
			if err := nackLease(t.Context(), q, got[0].Lease(), time.Time{}, fmt.Sprintf("failure %d", i+1)); err != nil {
				t.Fatal(err)
			}
		}
		info, err := in.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.History) != driver.MaxHistory || info.History[0].Attempt != n-driver.MaxHistory+1 ||
			info.History[len(info.History)-1].Error != fmt.Sprintf("failure %d", n) {
			t.Fatalf("after %d failures History has %d attempts, first %+v; want the last %d", n, len(info.History), info.History[0], driver.MaxHistory)
		}
	})
}
