package contracttest

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// testCounter checks driver.Inspector: after a mixed workload the counts
// equal the true number of jobs in each state, as the Inspector lists
// them.
func (s *suite) testCounter(t *testing.T) {
	checkAs(s, t, "MatchesJobs", func(t *testing.T, q queue.Queue, c driver.Inspector) {
		in := c
		const a, b, idle, d, e = "count-a", "count-b", "count-idle", "count-d", "count-e"
		wantCounts(t, c, in) // empty store

		// Ready, scheduled hours ahead, and a queue nobody reserves from.
		pushN(t, q, a, 12)
		pushN(t, q, b, 5)
		pushN(t, q, idle, 7)
		for range 4 {
			j := newJob(a)
			j.AvailableAt = time.Now().Add(3 * time.Hour)
			push(t, q, j)
		}
		jobs := []queue.Job{newJob(a), newJob(b), newJob(b)}
		jobs = append(jobs, jobs[0]) // a duplicate ID: stored once
		if _, err := q.PushMany(t.Context(), jobs); err != nil {
			t.Fatalf("PushMany: %v", err)
		}
		if s.h.Tx != nil {
			p, commit, _ := s.h.Tx(t, q)
			push(t, p, newJob(a))
			if err := commit(); err != nil {
				t.Fatalf("commit: %v", err)
			}
			p, _, rollback := s.h.Tx(t, q)
			push(t, p, newJob(a))
			if err := rollback(); err != nil {
				t.Fatalf("rollback: %v", err)
			}
		}
		wantCounts(t, c, in)

		// Claim, ack (one by one and in a batch), nack, fail, cancel.
		got := reserve(t, q, []string{a}, 8, longLease)
		if len(got) != 8 {
			t.Fatalf("reserved %d jobs of %s, want 8", len(got), a)
		}
		hold(t, q, got...)
		wantCounts(t, c, in)
		ack(t, q, got[0])
		if _, errs := complete(t, q, nil, driver.Completion{Lease: got[1].Lease(), Outcome: driver.OutcomeDone}, driver.Completion{Lease: got[2].Lease(), Outcome: driver.OutcomeDone}); errs[0] != nil || errs[1] != nil {
			t.Fatalf("Complete of two acks: %v; want both recorded", errs)
		}
		nack(t, q, got[3], time.Now().Add(time.Hour), "later")
		nack(t, q, got[4], time.Now(), "now")
		fail(t, q, got[5], "broken")
		fail(t, q, got[6], "broken too")
		dead := killJob(t, q, d, "dead in d")
		if cn := controller(q); cn != nil {
			if _, err := cn.Cancel(t.Context(), got[7].ID); err != nil { // running
				t.Fatalf("Cancel(running %s): %v", got[7].ID, err)
			}
			waiting := newJob(b)
			push(t, q, waiting)
			if _, err := cn.Cancel(t.Context(), waiting.ID); err != nil { // ready
				t.Fatalf("Cancel(ready %s): %v", waiting.ID, err)
			}
		} else {
			ack(t, q, got[7])
		}
		hold(t, q) // every job reserved has been settled
		wantCounts(t, c, in)

		// Dead letters retried, forgotten, flushed; a dead letter's ID
		// pushed again; a queue purged.
		if err := q.RetryDead(t.Context(), got[5].ID); err != nil {
			t.Fatalf("RetryDead: %v", err)
		}
		if err := q.ForgetDead(t.Context(), got[6].ID); err != nil {
			t.Fatalf("ForgetDead: %v", err)
		}
		revived := newJob(b)
		revived.ID = dead.ID
		push(t, q, revived)
		killJob(t, q, d, "flushed")
		killJob(t, q, e, "kept")
		if _, err := q.FlushDead(t.Context(), d); err != nil {
			t.Fatalf("FlushDead: %v", err)
		}
		if _, err := q.Purge(t.Context(), idle); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		wantCounts(t, c, in)

		// Everything left is worked off.
		for {
			jobs := reserve(t, q, []string{a, b}, 50, longLease)
			if len(jobs) == 0 {
				break
			}
			for _, j := range jobs {
				ack(t, q, j)
			}
		}
		wantCounts(t, c, in)
	})
}

// testCounterPastCap is testCounter's check that counts do not stop at
// the 10,000 up to which inspection counts rows.
func (s *suite) testCounterPastCap(t *testing.T) {
	checkAs(s, t, "PastTheCap", func(t *testing.T, q queue.Queue, c driver.Inspector) {
		bp := q
		const name, n = "count-many", 10050
		jobs := make([]queue.Job, n)
		for i := range jobs {
			jobs[i] = newJob(name)
		}
		for chunk := range slices.Chunk(jobs, 1000) {
			if _, err := bp.PushMany(t.Context(), chunk); err != nil {
				t.Fatalf("PushMany: %v", err)
			}
		}
		later := newJob(name)
		later.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, later)
		r := reserve(t, q, []string{name}, 2, longLease)
		ack(t, q, r[0])
		hold(t, q, r[1])
		got, err := c.Counts(t.Context())
		if err != nil {
			t.Fatalf("Counts: %v", err)
		}
		want := []driver.QueueCounts{{Queue: name, Pending: n, Ready: driver.Count{N: n - 2}, Scheduled: driver.Count{N: 1}, Running: driver.Count{N: 1}}}
		if s.h.Caps.NoDoneRetention == "" {
			want[0].Done = 1
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Counts = %v, want %v", got, want)
		}
	})
}

// testCounterScheduled is testCounter's check that the split of pending
// jobs by time is exact however many are scheduled: more than the 10,000
// up to which inspection counts rows, hours ahead, beside jobs due in
// minutes, ready ones, a running one and retries whose time has passed.
func (s *suite) testCounterScheduled(t *testing.T) {
	checkAs(s, t, "ManyAhead", func(t *testing.T, q queue.Queue, c driver.Inspector) {
		bp := q
		const name, ahead, soon, ready = "count-ahead", 10050, 6, 20
		now := time.Now()
		jobs := make([]queue.Job, 0, ahead+soon+ready)
		for i := range ahead { // one every second from an hour ahead: about 35 five-minute spans
			j := newJob(name)
			j.AvailableAt = now.Add(time.Hour + time.Duration(i)*time.Second)
			jobs = append(jobs, j)
		}
		for i := range soon { // due in 2 to 4.5 minutes: within the current five minutes or the next
			j := newJob(name)
			j.AvailableAt = now.Add(2*time.Minute + time.Duration(i)*30*time.Second)
			jobs = append(jobs, j)
		}
		for range ready {
			jobs = append(jobs, newJob(name))
		}
		for chunk := range slices.Chunk(jobs, 1000) {
			if _, err := bp.PushMany(t.Context(), chunk); err != nil {
				t.Fatalf("PushMany: %v", err)
			}
		}
		// Three claimed: one keeps running, two are retried a moment
		// later (scheduled when written, ready once their time passed).
		got := reserve(t, q, []string{name}, 3, longLease)
		if len(got) != 3 {
			t.Fatalf("reserved %d jobs, want 3", len(got))
		}
		retryAt := time.Now().Add(50 * time.Millisecond)
		nack(t, q, got[1], retryAt, "retry soon")
		nack(t, q, got[2], retryAt, "retry soon")
		hold(t, q, got[0])
		for time.Now().Before(retryAt.Add(s.tol)) {
			time.Sleep(10 * time.Millisecond) // until the retries are due by the clock
		}
		counts, err := c.Counts(t.Context())
		if err != nil {
			t.Fatalf("Counts: %v", err)
		}
		want := []driver.QueueCounts{{Queue: name, Pending: ahead + soon + ready,
			Ready: driver.Count{N: ready - 1}, Scheduled: driver.Count{N: ahead + soon}, Running: driver.Count{N: 1}}}
		if time.Since(now) > 2*time.Minute {
			t.Skipf("the check took %v: jobs due in 2 minutes may have come due", time.Since(now))
		}
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Fatalf("Counts = %v, want %v", counts, want)
		}
	})
}

// testDeadSince checks driver.Inspector: dead letters are counted
// from the time they were dead-lettered, a retried one no longer counts.
func (s *suite) testDeadSince(t *testing.T) {
	checkAs(s, t, "ByFailureTime", func(t *testing.T, q queue.Queue, c driver.Inspector) {
		count := func(since time.Time) driver.Count {
			t.Helper()
			n, err := c.DeadSince(t.Context(), since)
			if err != nil {
				t.Fatalf("DeadSince: %v", err)
			}
			return n
		}
		before := time.Now().Add(-s.tol)
		killJob(t, q, "since-a", "old")
		between := time.Now().Add(s.tol)
		for !time.Now().After(between.Add(s.tol)) {
			time.Sleep(time.Millisecond) // the later failures must be dated after between
		}
		killJob(t, q, "since-a", "new")
		retried := killJob(t, q, "since-b", "new, retried")
		pushN(t, q, "since-b", 2) // waiting jobs are not dead letters
		if got := count(before); got != (driver.Count{N: 3}) {
			t.Errorf("DeadSince(before every failure) = %+v, want 3", got)
		}
		if got := count(between); got != (driver.Count{N: 2}) {
			t.Errorf("DeadSince(between the failures) = %+v, want 2", got)
		}
		if err := q.RetryDead(t.Context(), retried.ID); err != nil {
			t.Fatalf("RetryDead: %v", err)
		}
		if got := count(between); got != (driver.Count{N: 1}) {
			t.Errorf("DeadSince after a retry = %+v, want 1", got)
		}
		if got := count(time.Now().Add(time.Hour)); got != (driver.Count{}) {
			t.Errorf("DeadSince(an hour ahead) = %+v, want 0", got)
		}
	})
	// Dead letters in several queues, some of each dead-lettered before
	// the time asked about (drivers may count queue by queue).
	checkAs(s, t, "SeveralQueues", func(t *testing.T, q queue.Queue, c driver.Inspector) {
		older := map[string]int{"since-x": 3, "since-y": 1, "since-z": 0}
		newer := map[string]int{"since-x": 1, "since-y": 0, "since-z": 2}
		for name, n := range older {
			for range n {
				killJob(t, q, name, "old")
			}
		}
		between := time.Now().Add(s.tol)
		for !time.Now().After(between.Add(s.tol)) {
			time.Sleep(time.Millisecond)
		}
		for name, n := range newer {
			for range n {
				killJob(t, q, name, "new")
			}
		}
		pushN(t, q, "since-y", 2)
		for _, tc := range []struct {
			since time.Time
			want  int64
		}{{time.Now().Add(-time.Hour), 7}, {between, 3}, {time.Now().Add(time.Hour), 0}} {
			got, err := c.DeadSince(t.Context(), tc.since)
			if err != nil {
				t.Fatalf("DeadSince: %v", err)
			}
			if got != (driver.Count{N: tc.want}) {
				t.Errorf("DeadSince(%v) = %+v, want %d", tc.since, got, tc.want)
			}
		}
	})
}

// wantCounts compares c's counts with the jobs listed in each state.
func wantCounts(t *testing.T, c driver.Inspector, in driver.Inspector) {
	t.Helper()
	want := map[string]*driver.QueueCounts{}
	for _, st := range driver.JobStates {
		var f driver.JobFilter
		f.State, f.Limit = st, 500
		for {
			page, err := in.ListJobs(t.Context(), f)
			if err != nil {
				t.Fatalf("ListJobs(%s): %v", st, err)
			}
			for _, j := range page.Jobs {
				w := want[j.QueueName()]
				if w == nil {
					w = &driver.QueueCounts{Queue: j.QueueName()}
					want[j.QueueName()] = w
				}
				switch st {
				case queue.StateReady:
					w.Ready.N++
				case queue.StateScheduled:
					w.Scheduled.N++
				case queue.StateRunning:
					w.Running.N++
				case queue.StateDead:
					w.Dead++
				case queue.StateDone:
					w.Done++
				case queue.StateCancelled:
					w.Cancelled++
				}
			}
			if page.Next == "" {
				break
			}
			f.After = page.Next
		}
	}
	var wants []driver.QueueCounts
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := *want[name]
		w.Pending = w.Ready.N + w.Scheduled.N + w.Running.N
		wants = append(wants, w)
	}
	got, err := c.Counts(t.Context())
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	if g, w := fmt.Sprint(got), fmt.Sprint(wants); g != w {
		t.Fatalf("Counts =\n%s\nwant (the jobs listed in each state)\n%s", g, w)
	}
}
