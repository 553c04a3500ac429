package contracttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// checkAs runs fn as a parallel subtest on a new queue that has the
// ability I (one of the interfaces driver.CapabilitiesOf finds), and skips
// it, saying what the driver lacks, when it has not.
func checkAs[I any](s *suite, t *testing.T, name string, fn func(t *testing.T, q queue.Queue, x I)) {
	t.Helper()
	s.check(t, name, func(t *testing.T, q queue.Queue) {
		x, ok := q.(I)
		if !ok {
			t.Skip(lacks(q, reflect.TypeFor[I]().Name()))
		}
		fn(t, q, x)
	})
}

// lacks is the reason to skip a check of the ability named on q.
func lacks(q queue.Queue, ability string) string {
	if err := driver.CapabilitiesOf(q).Require(ability); err != nil {
		return err.Error()
	}
	return "driver does not implement " + ability
}

// inspector returns q's Inspector, nil when it has none.
func inspector(q queue.Queue) driver.Inspector { return driver.CapabilitiesOf(q).Inspector }

// controller returns q's Controller, nil when it has none.
func controller(q queue.Queue) driver.Controller { return driver.CapabilitiesOf(q).Controller }

// workflows returns q's Workflows, nil when it has none.
func workflows(q queue.Queue) driver.Workflows { return driver.CapabilitiesOf(q).Workflows }

// scheduler returns q's Scheduler, nil when it has none.
func scheduler(q queue.Queue) driver.Scheduler { return driver.CapabilitiesOf(q).Scheduler }

// testPeer checks two handles on one store (Harness.Peer).
func (s *suite) testPeer(t *testing.T) {
	if s.h.Peer == nil {
		t.Skip("Harness.Peer is nil: the driver is not shared by several processes")
	}
	s.check(t, "SharedStore", func(t *testing.T, q queue.Queue) {
		p := s.h.Peer(t, q)
		j := newJob("peer")
		push(t, q, j)
		r := reserveOne(t, p, "peer", j.ID, longLease)
		expectNone(t, q, "peer")
		ack(t, q, r) // a lease is the store's, not the handle's
		wantLen(t, p, "peer", 0)
	})
	s.check(t, "ConcurrentReservers", func(t *testing.T, q queue.Queue) {
		s.concurrentReservers(t, []queue.Queue{q, s.h.Peer(t, q)}, 240)
	})
}

// testBatchPusher checks driver.BatchPusher.
func (s *suite) testBatchPusher(t *testing.T) {
	checkAs(s, t, "Duplicates", func(t *testing.T, q queue.Queue, bp driver.BatchPusher) {
		deadQueue := "bp-dead" // a dead letter of another queue is revived too
		if s.h.Caps.IDsPerQueue != "" {
			t.Logf("the dead letter revived is of the same queue: %s", s.h.Caps.IDsPerQueue)
			deadQueue = "bp"
		}
		dead := killJob(t, q, deadQueue, "dead")
		held := newJob("bp")
		held.UniqueKey = "held"
		push(t, q, held)

		a, b, c, d, e, f, g, h := newJob("bp"), newJob("bp"), newJob("bp"), newJob("bp"), newJob("bp"), newJob("bp"), newJob("bp"), newJob("bp")
		a.UniqueKey = "k1"
		b.UniqueKey = "k2"
		c.UniqueKey = "k1"   // duplicate of a, within the batch
		d.UniqueKey = "held" // duplicate of a stored job's key
		e.ID = held.ID       // an active job's ID
		g.ID = a.ID          // duplicate ID within the batch
		h.ID = dead.ID       // a dead letter's ID: revived
		h.Payload = []byte("revived")
		batch := []queue.Job{a, b, c, d, e, f, g, h}
		stored, err := bp.PushMany(t.Context(), batch)
		if err != nil {
			t.Fatalf("PushMany: %v", err)
		}
		want := []bool{true, true, false, false, false, true, false, true}
		if !slices.Equal(stored, want) {
			t.Fatalf("PushMany stored = %v, want %v (a, b, dup key in batch, dup stored key, active ID, f, dup ID in batch, dead letter's ID)", stored, want)
		}
		wantLen(t, q, "bp", 5)
		if dl := deadLetters(t, q, "", 10); len(dl) != 0 {
			t.Fatalf("dead letters %v, want none after pushing the dead letter's ID", ids(dl))
		}
		got := reserve(t, q, []string{"bp"}, 10, longLease)
		if want := []string{held.ID, a.ID, b.ID, f.ID, h.ID}; !slices.Equal(ids(got), want) {
			t.Fatalf("reserved %v, want %v (insertion order, the batch in its own order)", ids(got), want)
		}
		if got[4].Attempts != 1 || string(got[4].Payload) != "revived" {
			t.Fatalf("revived dead letter: Attempts %d, payload %q; want 1, %q", got[4].Attempts, got[4].Payload, "revived")
		}
	})

	checkAs(s, t, "Large", func(t *testing.T, q queue.Queue, bp driver.BatchPusher) {
		const n = 1500
		jobs := make([]queue.Job, n)
		for i := range jobs {
			jobs[i] = newJob("big")
			jobs[i].UniqueKey = fmt.Sprintf("key-%d", i)
			jobs[i].Tags = []string{"bulk"}
		}
		stored, err := bp.PushMany(t.Context(), jobs)
		if err != nil {
			t.Fatalf("PushMany of %d jobs: %v", n, err)
		}
		if len(stored) != n || slices.Contains(stored, false) {
			t.Fatalf("PushMany of %d new jobs stored %d of %d flags true", n, countTrue(stored), len(stored))
		}
		wantLen(t, q, "big", n)
		// A retry of the same batch stores nothing: IDs and keys are held.
		stored, err = bp.PushMany(t.Context(), jobs)
		if err != nil || slices.Contains(stored, true) {
			t.Fatalf("PushMany again: %d stored, err %v; want 0, nil", countTrue(stored), err)
		}
		seen := make(map[string]bool)
		for len(seen) < n {
			got := reserve(t, q, []string{"big"}, 500, longLease)
			if len(got) == 0 {
				t.Fatalf("only %d of %d jobs reservable", len(seen), n)
			}
			for _, j := range got {
				if seen[j.ID] {
					t.Fatalf("job %s reserved twice", j.ID)
				}
				seen[j.ID] = true
			}
		}
	})

	checkAs(s, t, "EmptyAndCancelled", func(t *testing.T, q queue.Queue, bp driver.BatchPusher) {
		stored, err := bp.PushMany(t.Context(), nil)
		if err != nil || len(stored) != 0 {
			t.Fatalf("PushMany(nil) = %v, %v; want no flags, nil", stored, err)
		}
		_, err = bp.PushMany(cancelled(t), []queue.Job{newJob("bpc")})
		wantErr(t, "PushMany with a cancelled context", err, context.Canceled)
		wantLen(t, q, "bpc", 0)
	})
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// staleBatch reserves four jobs of queueName under lease and acks the
// first. It returns them, a batch of leases for a batch call (the acked
// job's, two current ones, the fourth job's with a wrong token and an
// unknown job's), and the three of those the call must report lost.
func staleBatch(t *testing.T, q queue.Queue, queueName string, lease time.Duration) (jobs []queue.Job, batch, stale []driver.Lease) {
	t.Helper()
	pushN(t, q, queueName, 4)
	jobs = reserve(t, q, []string{queueName}, 4, lease)
	if len(jobs) != 4 {
		t.Fatalf("Reserve returned %d jobs, want 4", len(jobs))
	}
	ack(t, q, jobs[0])
	wrong := driver.Lease{JobID: jobs[3].ID, Token: jobs[3].LeaseToken + "x"}
	unknown := driver.Lease{JobID: driver.NewID(), Token: "t"}
	batch = []driver.Lease{jobs[0].Lease(), jobs[1].Lease(), wrong, jobs[2].Lease(), unknown}
	return jobs, batch, []driver.Lease{jobs[0].Lease(), wrong, unknown}
}

// swappedBatch reserves three jobs of queueName and returns them and a
// batch of leases: the first job's, then the second's and third's IDs
// each with the other's current token. Only the first lease is current: a
// token current for another job than the one its lease names is not.
func swappedBatch(t *testing.T, q queue.Queue, queueName string) (jobs []queue.Job, batch []driver.Lease) {
	t.Helper()
	pushN(t, q, queueName, 3)
	jobs = reserve(t, q, []string{queueName}, 3, longLease)
	if len(jobs) != 3 {
		t.Fatalf("Reserve returned %d jobs, want 3", len(jobs))
	}
	return jobs, []driver.Lease{jobs[0].Lease(),
		{JobID: jobs[1].ID, Token: jobs[2].LeaseToken},
		{JobID: jobs[2].ID, Token: jobs[1].LeaseToken}}
}

// wantLost fails unless a batch call called what reported exactly the
// leases want as lost, in any order.
func wantLost(t *testing.T, what string, got, want []driver.Lease) {
	t.Helper()
	key := func(ls []driver.Lease) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.JobID+"/"+l.Token)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(key(got), key(want)) {
		t.Fatalf("%s lost %v, want %v (already acked, wrong token, unknown job)", what, key(got), key(want))
	}
}

// testBatchAcker checks many acks in one Complete call.
func (s *suite) testBatchAcker(t *testing.T) {
	s.check(t, "LostLeases", func(t *testing.T, q queue.Queue) {
		jobs, batch, stale := staleBatch(t, q, "ba", longLease)
		lost, err := ackMany(t.Context(), q, batch)
		if err != nil {
			t.Fatalf("AckMany: %v", err)
		}
		wantLost(t, "AckMany", lost, stale)
		wantLen(t, q, "ba", 1) // jobs[3] is still held under its real lease
		expectNone(t, q, "ba")
		ack(t, q, jobs[3])

		lost, err = ackMany(t.Context(), q, nil)
		if err != nil || len(lost) != 0 {
			t.Fatalf("AckMany(nil) = %v, %v; want none, nil", lost, err)
		}
	})

	s.check(t, "SwappedTokens", func(t *testing.T, q queue.Queue) {
		jobs, batch := swappedBatch(t, q, "bas")
		lost, err := ackMany(t.Context(), q, batch)
		if err != nil {
			t.Fatalf("AckMany: %v", err)
		}
		wantLost(t, "AckMany", lost, batch[1:])
		// The first job is gone, the other two are still held under their
		// own leases.
		wantLen(t, q, "bas", 2)
		expectNone(t, q, "bas")
		ack(t, q, jobs[1])
		ack(t, q, jobs[2])
	})

	s.check(t, "Cancelled", func(t *testing.T, q queue.Queue) {
		j := newJob("bac")
		push(t, q, j)
		r := reserveOne(t, q, "bac", j.ID, longLease)
		_, err := ackMany(cancelled(t), q, []driver.Lease{r.Lease()})
		wantErr(t, "AckMany with a cancelled context", err, context.Canceled)
		ack(t, q, r) // the lease is still current
	})
}

// testBatchExtender checks Queue.ExtendMany.
func (s *suite) testBatchExtender(t *testing.T) {
	s.check(t, "LostLeases", func(t *testing.T, q queue.Queue) {
		const lease = time.Second // long enough to extend in time on a loaded machine
		jobs, batch, stale := staleBatch(t, q, "be", lease)
		lost, err := q.ExtendMany(t.Context(), batch, longLease)
		if err != nil {
			t.Fatalf("ExtendMany: %v", err)
		}
		wantLost(t, "ExtendMany", lost, stale)
		// Past the original lease: jobs 1 and 2 are held by their extended
		// leases, job 3 (not extended: wrong token) is re-delivered.
		time.Sleep(lease + 500*time.Millisecond)
		again := reserve(t, q, []string{"be"}, 4, longLease)
		if len(again) != 1 || again[0].ID != jobs[3].ID {
			t.Fatalf("Reserve after the original lease = %v, want only %s (the job not extended)", ids(again), jobs[3].ID)
		}
		ack(t, q, jobs[1])
		ack(t, q, jobs[2])
		ack(t, q, again[0])

		lost, err = q.ExtendMany(t.Context(), nil, longLease)
		if err != nil || len(lost) != 0 {
			t.Fatalf("ExtendMany(nil) = %v, %v; want none, nil", lost, err)
		}
	})

	s.check(t, "Cancelled", func(t *testing.T, q queue.Queue) {
		j := newJob("bec")
		push(t, q, j)
		r := reserveOne(t, q, "bec", j.ID, longLease)
		_, err := q.ExtendMany(cancelled(t), []driver.Lease{r.Lease()}, longLease)
		wantErr(t, "ExtendMany with a cancelled context", err, context.Canceled)
		ack(t, q, r) // the lease is still current
	})
}

// waitAsync runs Wait in a goroutine and returns a channel that receives
// its result.
func waitAsync(ctx context.Context, w driver.Waiter, queues []string, max time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- w.Wait(ctx, queues, max) }()
	return done
}

// within returns the value from ch, failing if none arrives in d.
func within(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: Wait did not return within %v", what, d)
		return nil
	}
}

// testWaiter checks driver.Waiter.
func (s *suite) testWaiter(t *testing.T) {
	const long = time.Minute // a max Wait must not reach in these checks

	checkAs(s, t, "PushWakes", func(t *testing.T, q queue.Queue, w driver.Waiter) {
		done := waitAsync(t.Context(), w, []string{"w-other", "w"}, long)
		time.Sleep(100 * time.Millisecond) // let Wait block
		push(t, q, newJob("w"))
		if err := within(t, done, patience, "after a Push"); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	})

	checkAs(s, t, "ReadyReturnsAtOnce", func(t *testing.T, q queue.Queue, w driver.Waiter) {
		push(t, q, newJob("w"))
		done := waitAsync(t.Context(), w, []string{"w"}, long)
		if err := within(t, done, patience, "with a job ready"); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	})

	checkAs(s, t, "ReturnsAfterMax", func(t *testing.T, q queue.Queue, w driver.Waiter) {
		done := waitAsync(t.Context(), w, []string{"w"}, 200*time.Millisecond)
		if err := within(t, done, patience, "on an empty queue"); err != nil {
			t.Fatalf("Wait on an empty queue returned %v, want nil after max", err)
		}
	})

	checkAs(s, t, "HonoursContext", func(t *testing.T, q queue.Queue, w driver.Waiter) {
		ctx, cancel := context.WithCancel(t.Context())
		done := waitAsync(ctx, w, []string{"w"}, long)
		time.Sleep(100 * time.Millisecond)
		cancel()
		err := within(t, done, patience, "after cancel")
		wantErr(t, "Wait after its context was cancelled", err, context.Canceled)
		wantErr(t, "Wait with a cancelled context", w.Wait(cancelled(t), []string{"w"}, long), context.Canceled)
	})
}

// testInspector checks driver.Inspector, and driver.Reporter with it.
func (s *suite) testInspector(t *testing.T) {
	// states makes one job in each state on queue "st" and returns their
	// IDs by state.
	states := func(t *testing.T, q queue.Queue) map[driver.JobState]string {
		out := make(map[driver.JobState]string)
		done := newJob("st")
		push(t, q, done)
		ack(t, q, reserveOne(t, q, "st", done.ID, longLease))
		out[queue.StateDone] = done.ID
		out[queue.StateDead] = killJob(t, q, "st", "it died").ID
		running := newJob("st")
		push(t, q, running)
		hold(t, q, reserveOne(t, q, "st", running.ID, longLease))
		out[queue.StateRunning] = running.ID
		sched := newJob("st")
		sched.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, sched)
		out[queue.StateScheduled] = sched.ID
		ready := newJob("st")
		push(t, q, ready)
		out[queue.StateReady] = ready.ID
		if c := controller(q); c != nil {
			j := newJob("st")
			push(t, q, j)
			if _, err := c.Cancel(t.Context(), j.ID); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			out[queue.StateCancelled] = j.ID
		}
		return out
	}

	checkAs(s, t, "GetJob", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		byState := states(t, q)
		for _, st := range driver.JobStates {
			id, ok := byState[st]
			if !ok {
				continue // a cancelled job, on a driver that cannot cancel
			}
			info, err := in.GetJob(t.Context(), id)
			if (st == queue.StateDone || st == queue.StateCancelled) && s.h.Caps.NoDoneRetention != "" {
				wantErr(t, "GetJob of a finished job (no retention)", err, queue.ErrNotFound)
				continue
			}
			if err != nil {
				t.Fatalf("GetJob(%s job): %v", st, err)
			}
			if info.ID != id || info.State != st || info.Queue != "st" || info.Name != "contract" {
				t.Errorf("GetJob(%s job) = ID %s, State %s, Queue %q, Name %q; want %s, %s, st, contract", st, info.ID, info.State, info.Queue, info.Name, id, st)
			}
			if info.UpdatedAt.IsZero() || info.CreatedAt.IsZero() {
				t.Errorf("GetJob(%s job): UpdatedAt %v, CreatedAt %v; want both set", st, info.UpdatedAt, info.CreatedAt)
			}
			finished := st == queue.StateDead || st == queue.StateDone || st == queue.StateCancelled
			if finished == info.FinishedAt.IsZero() {
				t.Errorf("GetJob(%s job): FinishedAt %v; want it set exactly for dead, done and cancelled jobs", st, info.FinishedAt)
			}
			switch st {
			case queue.StateDead:
				if info.LastError != "it died" || info.Attempts != 1 {
					t.Errorf("GetJob(dead job): LastError %q, Attempts %d; want %q, 1", info.LastError, info.Attempts, "it died")
				}
			case queue.StateRunning:
				if info.Attempts != 1 || info.LeaseExpiresAt.IsZero() {
					t.Errorf("GetJob(running job): Attempts %d, LeaseExpiresAt %v; want 1 and a lease expiry", info.Attempts, info.LeaseExpiresAt)
				}
			}
		}
		_, err := in.GetJob(t.Context(), driver.NewID())
		wantErr(t, "GetJob of an unknown ID", err, queue.ErrNotFound)
	})

	checkAs(s, t, "ListJobsByState", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		byState := states(t, q)
		push(t, q, newJob("st-other")) // filtered out by Queue
		for _, st := range driver.JobStates {
			if _, ok := byState[st]; !ok || (st == queue.StateDone || st == queue.StateCancelled) && s.h.Caps.NoDoneRetention != "" {
				continue
			}
			page, err := in.ListJobs(t.Context(), driver.JobFilter{State: st, Queue: "st"})
			if err != nil {
				t.Fatalf("ListJobs(%s): %v", st, err)
			}
			if len(page.Jobs) != 1 || page.Jobs[0].ID != byState[st] || page.Jobs[0].State != st || page.Next != "" {
				t.Errorf("ListJobs(%s, queue st) = %+v, want the one %s job %s and no next page", st, page, st, byState[st])
			}
		}
		page, err := in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady})
		if err != nil || len(page.Jobs) != 2 {
			t.Fatalf("ListJobs(ready, every queue) = %d jobs, %v; want 2, nil", len(page.Jobs), err)
		}
	})

	checkAs(s, t, "ListJobsFilters", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		mk := func(name string, tags []string, payload string) string {
			j := newJob("flt")
			j.Name, j.Tags, j.Payload = name, tags, []byte(payload)
			push(t, q, j)
			return j.ID
		}
		ann := mk("Alpha", []string{"red", "blue"}, `{"user":"ann"}`)
		bob := mk("Beta", []string{"red"}, `{"user":"bob"}`)
		bob2 := mk("Alpha", nil, `{"user":"bobby"}`)
		cases := []struct {
			f    driver.JobFilter
			want []string
		}{
			{driver.JobFilter{Name: "Alpha"}, []string{ann, bob2}},
			{driver.JobFilter{Tag: "red"}, []string{ann, bob}},
			{driver.JobFilter{Tag: "blue"}, []string{ann}},
			{driver.JobFilter{Search: "bob"}, []string{bob, bob2}},
			{driver.JobFilter{Name: "Alpha", Search: "bob"}, []string{bob2}},
			{driver.JobFilter{Queue: "flt", Tag: "green"}, nil},
			{driver.JobFilter{Queue: "elsewhere"}, nil},
		}
		for _, c := range cases {
			c.f.State = queue.StateReady
			page, err := in.ListJobs(t.Context(), c.f)
			if err != nil {
				t.Fatalf("ListJobs(%+v): %v", c.f, err)
			}
			var got []string
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			slices.Sort(got)
			if want := sorted(c.want...); !slices.Equal(got, want) {
				t.Errorf("ListJobs(%+v) = %v, want %v", c.f, got, want)
			}
		}
	})

	checkAs(s, t, "ListJobsFieldSearch", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		// Field filters over JSON payloads, with substrings, in ready
		// and dead jobs; bytes that are not JSON never match one, and a
		// filter that does not parse fails with ErrBadSearch.
		mk := func(queueName, payload string) string {
			j := newJob(queueName)
			j.Payload = []byte(payload)
			push(t, q, j)
			return j.ID
		}
		ann := mk("fs", `{"user_id":42,"name":"ann","vip":true,"address":{"city":"Oslo"}}`)
		bob := mk("fs", `{"user_id":7,"name":"bob","vip":false,"address":{"city":"Rome"}}`)
		cid := mk("fs", `{"user_id":42.0,"name":"cid","note":"ORD-7"}`)
		raw := mk("fs", "user_id = 42 \xff\x00 not JSON")
		dan := mk("fs", `{"user_id":"42","name":"dan","vip":null}`)
		dead := mk("fsd", `{"user_id":42,"name":"eve"}`)
		fail(t, q, reserveOne(t, q, "fsd", dead, longLease), "field search")
		if s.h.Caps.NoFieldSearch != "" {
			_, err := in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady, Queue: "fs", Search: "payload.user_id = 42"})
			if !errors.Is(err, queue.ErrUnsupported) {
				t.Fatalf("a field search on a driver without field filters = %v, want ErrUnsupported", err)
			}
			t.Skip(s.h.Caps.NoFieldSearch)
		}
		for _, c := range []struct {
			state  driver.JobState
			search string
			want   []string
		}{
			{queue.StateReady, "payload.user_id = 42", []string{ann, cid}},
			{queue.StateReady, `payload.user_id = "42"`, []string{dan}},
			{queue.StateReady, "payload.user_id != 42", []string{bob, dan}},
			{queue.StateReady, "payload.vip = true", []string{ann}},
			{queue.StateReady, "payload.vip != true", []string{bob, dan}},
			{queue.StateReady, "payload.vip = null", []string{dan}},
			{queue.StateReady, `payload.address.city = "Rome"`, []string{bob}},
			{queue.StateReady, `payload.user_id = 42 AND payload.name = "cid"`, []string{cid}},
			{queue.StateReady, `payload.user_id = 42 AND "ORD-"`, []string{cid}},
			{queue.StateReady, `payload.user_id = 42 AND "Oslo" AND "ann"`, []string{ann}},
			{queue.StateReady, `payload.missing = 1`, nil},
			{queue.StateReady, "user_id = 42", []string{raw}}, // not a filter: a substring
			{queue.StateDead, "payload.user_id = 42", []string{dead}},
		} {
			f := driver.JobFilter{State: c.state, Search: c.search}
			page, err := in.ListJobs(t.Context(), f)
			if err != nil {
				t.Fatalf("ListJobs(%+v): %v", f, err)
			}
			var got []string
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			slices.Sort(got)
			if want := sorted(c.want...); !slices.Equal(got, want) || page.Next != "" {
				t.Errorf("ListJobs(%s, %q) = %v, Next %q; want %v and no next page", c.state, c.search, got, page.Next, want)
			}
		}
		// Counted as listed, where the driver counts (the dashboard's
		// "all matching" buttons).
		if c := driver.CapabilitiesOf(q).Controller; c != nil {
			for search, want := range map[string]int64{"payload.user_id = 42": 2, `payload.vip != true AND "bob"`: 1, `payload.user_id = 42 AND "nobody"`: 0} {
				f := driver.JobFilter{State: queue.StateReady, Queue: "fs", Search: search}
				if got, err := c.CountJobs(t.Context(), f, 100); err != nil || got != (driver.Count{N: want}) {
					t.Errorf("CountJobs(ready, %q) = %+v, %v; want %d", search, got, err, want)
				}
			}
		}
		for _, bad := range []string{"payload.user_id", "payload.user_id = forty", "payload.a = 1 OR payload.b = 2"} {
			_, err := in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady, Search: bad})
			if !errors.Is(err, driver.ErrBadSearch) {
				t.Errorf("ListJobs(ready, %q) = %v, want ErrBadSearch", bad, err)
			}
		}
	})

	checkAs(s, t, "ListJobsSearchBounded", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		// 25 ready jobs; the 3rd and the 24th hold the needle. A search
		// bounded to 10 jobs per call says where it stopped, so the
		// caller can tell "none among these 10" from "none at all".
		var ids []string
		for i := range 25 {
			j := newJob("sb2")
			if i == 2 || i == 23 {
				j.Payload = fmt.Appendf(nil, `{"needle":%d}`, i)
			}
			push(t, q, j)
			ids = append(ids, j.ID)
		}
		type want struct {
			jobs    []string
			scanned int
			next    bool
		}
		f := driver.JobFilter{State: queue.StateReady, Queue: "sb2", Search: "needle", Scan: 10, Limit: 5}
		steps := []want{
			{[]string{ids[2]}, 10, true},  // jobs 1-10
			{nil, 10, true},               // jobs 11-20: none among them
			{[]string{ids[23]}, 0, false}, // jobs 21-25: the end
		}
		for i, w := range steps {
			page, err := in.ListJobs(t.Context(), f)
			if err != nil {
				t.Fatalf("search call %d: ListJobs(%+v): %v", i+1, f, err)
			}
			var got []string
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, w.jobs) || page.Scanned != w.scanned || (page.Next != "") != w.next {
				t.Fatalf("search call %d: ListJobs(%+v) = jobs %v, Scanned %d, Next %q; want jobs %v, Scanned %d, a next cursor %v",
					i+1, f, got, page.Scanned, page.Next, w.jobs, w.scanned, w.next)
			}
			f.After = page.Next
		}
		// Unbounded by the caller, the driver's default covers 25 jobs: both
		// matches on one page, nothing left to continue.
		page, err := in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady, Queue: "sb2", Search: "needle"})
		if err != nil || len(page.Jobs) != 2 || page.Scanned != 0 || page.Next != "" {
			t.Fatalf("search with the default bound = %d jobs, Scanned %d, Next %q, %v; want 2, 0, \"\", nil", len(page.Jobs), page.Scanned, page.Next, err)
		}
		// A page the search filled is not a bounded search: Scanned stays 0
		// and Next is the usual cursor.
		page, err = in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady, Queue: "sb2", Search: "needle", Limit: 1})
		if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != ids[2] || page.Scanned != 0 || page.Next == "" {
			t.Fatalf("search filling its page = %d jobs, Scanned %d, Next %q, %v; want job %s, 0, a cursor, nil", len(page.Jobs), page.Scanned, page.Next, err, ids[2])
		}
	})

	checkAs(s, t, "ListJobsSearchContinues", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		// A bounded search over several queues and priorities, followed
		// by its Next cursors, returns every match once, in list order:
		// ready jobs in claim order, dead letters newest first. A page
		// that stopped at its bound before filling says it examined
		// exactly Scan jobs (Scan is below every driver's first window).
		const scan, limit = 7, 3
		var ready, dead []string
		for i := range 60 {
			j := newJob([]string{"sc-a", "sc-b", "sc-c"}[i%3])
			j.Priority = []int{0, 5, 0, -2}[i%4]
			if i%11 == 4 {
				j.Payload = fmt.Appendf(nil, `{"needle":%d}`, i)
			}
			push(t, q, j)
		}
		for i := range 14 {
			j := newJob([]string{"sd-a", "sd-b"}[i%2])
			if i%5 == 1 {
				j.Payload = fmt.Appendf(nil, `{"needle":%d}`, i)
			}
			push(t, q, j)
			fail(t, q, reserveOne(t, q, j.Queue, j.ID, longLease), "search test")
		}
		list := func(f driver.JobFilter) (ids, needles []string) {
			t.Helper()
			for {
				page, err := in.ListJobs(t.Context(), f)
				if err != nil {
					t.Fatalf("ListJobs(%+v): %v", f, err)
				}
				for _, j := range page.Jobs {
					ids = append(ids, j.ID)
					if strings.Contains(string(j.Payload), "needle") {
						needles = append(needles, j.ID)
					}
				}
				if page.Next == "" {
					return ids, needles
				}
				f.After = page.Next
			}
		}
		_, ready = list(driver.JobFilter{State: queue.StateReady, Limit: 500})
		_, dead = list(driver.JobFilter{State: queue.StateDead, Limit: 500})
		if len(ready) != 6 || len(dead) != 3 {
			t.Fatalf("listing: %d ready and %d dead needles, want 6 and 3", len(ready), len(dead))
		}
		for _, c := range []struct {
			state driver.JobState
			want  []string
		}{{queue.StateReady, ready}, {queue.StateDead, dead}} {
			f := driver.JobFilter{State: c.state, Search: "needle", Scan: scan, Limit: limit}
			var got []string
			for call := 1; ; call++ {
				if call > 100 {
					t.Fatalf("%s: the search did not end after 100 calls", c.state)
				}
				page, err := in.ListJobs(t.Context(), f)
				if err != nil {
					t.Fatalf("%s: search call %d: ListJobs(%+v): %v", c.state, call, f, err)
				}
				for _, j := range page.Jobs {
					got = append(got, j.ID)
				}
				switch {
				case len(page.Jobs) > limit:
					t.Fatalf("%s: search call %d: %d jobs, over the limit %d", c.state, call, len(page.Jobs), limit)
				case page.Next == "" && page.Scanned != 0:
					t.Fatalf("%s: search call %d: Scanned %d on the last page", c.state, call, page.Scanned)
				case page.Next != "" && len(page.Jobs) < limit && page.Scanned != scan:
					t.Fatalf("%s: search call %d: a short page with more to search says Scanned %d, want %d", c.state, call, page.Scanned, scan)
				case page.Scanned != 0 && page.Scanned != scan:
					t.Fatalf("%s: search call %d: Scanned %d, want 0 or %d", c.state, call, page.Scanned, scan)
				}
				if page.Next == "" {
					break
				}
				f.After = page.Next
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: following the search found %v, want %v", c.state, got, c.want)
			}
		}
	})

	checkAs(s, t, "ListJobsPaging", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		const n = 57
		pushed := make(map[string]bool)
		for _, j := range pushN(t, q, "pg", n) {
			pushed[j.ID] = true
		}
		pushN(t, q, "pg-other", 3)
		first, err := in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady, Queue: "pg"})
		if err != nil || len(first.Jobs) != 50 || first.Next == "" {
			t.Fatalf("ListJobs without a limit = %d jobs, next %q, %v; want the default page of 50 and a next page", len(first.Jobs), first.Next, err)
		}
		seen := make(map[string]bool)
		f := driver.JobFilter{State: queue.StateReady, Queue: "pg", Limit: 8}
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatal("ListJobs paging does not end")
			}
			page, err := in.ListJobs(t.Context(), f)
			if err != nil {
				t.Fatalf("ListJobs(%+v): %v", f, err)
			}
			if len(page.Jobs) > 8 {
				t.Fatalf("page of %d jobs, want at most the limit 8", len(page.Jobs))
			}
			for _, j := range page.Jobs {
				if !pushed[j.ID] || seen[j.ID] {
					t.Fatalf("paging returned job %s (pushed to pg: %v, seen before: %v)", j.ID, pushed[j.ID], seen[j.ID])
				}
				seen[j.ID] = true
			}
			if page.Next == "" {
				break
			}
			f.After = page.Next
		}
		if len(seen) != n {
			t.Fatalf("paging covered %d jobs, want %d", len(seen), n)
		}
		// A cursor that no page gave is refused with ErrBadCursor.
		_, err = in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateReady, After: "\x00not a cursor'; --"})
		wantErr(t, "ListJobs after a foreign cursor", err, queue.ErrBadCursor)
	})

	checkAs(s, t, "ListJobsOrder", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		// Waiting jobs are listed in claim order, by keyset pages of 2:
		// priority, then AvailableAt, then insertion.
		now := time.Now().Truncate(time.Millisecond)
		mk := func(prio int, avail time.Duration) string {
			j := newJob("lo")
			j.Priority, j.AvailableAt = prio, now.Add(avail)
			push(t, q, j)
			return j.ID
		}
		late := mk(0, -time.Minute)
		early := mk(0, -time.Hour)
		urgent := mk(5, -time.Second)
		plain := mk(0, -time.Hour) // after early: same time, inserted later
		soon := mk(0, time.Hour)
		sooner := mk(0, 30*time.Minute)
		urgentLater := mk(5, 2*time.Hour)
		list := func(st driver.JobState, queueName string) []string {
			t.Helper()
			var got []string
			f := driver.JobFilter{State: st, Queue: queueName, Limit: 2}
			for range 10 {
				page, err := in.ListJobs(t.Context(), f)
				if err != nil {
					t.Fatalf("ListJobs(%+v): %v", f, err)
				}
				for _, j := range page.Jobs {
					got = append(got, j.ID)
				}
				if page.Next == "" {
					break
				}
				f.After = page.Next
			}
			return got
		}
		if got, want := list(queue.StateReady, "lo"), []string{urgent, early, plain, late}; !slices.Equal(got, want) {
			t.Errorf("ready jobs listed %v, want claim order %v", got, want)
		}
		if got, want := list(queue.StateScheduled, ""), []string{urgentLater, sooner, soon}; !slices.Equal(got, want) {
			t.Errorf("scheduled jobs listed %v, want claim order %v", got, want)
		}
		// Dead letters are listed by failure time, newest first, whatever
		// their insertion order.
		claimed := map[string]queue.Job{}
		for _, j := range reserve(t, q, []string{"lo"}, 10, longLease) {
			claimed[j.ID] = j
		}
		var failed []string
		for _, id := range []string{plain, early, late} {
			stamp := time.Now().Add(s.tol)
			for !time.Now().After(stamp) {
				time.Sleep(time.Millisecond) // each failure dated after the one before
			}
			j, ok := claimed[id]
			if !ok {
				t.Fatalf("job %s was not reserved with the other ready ones", id)
			}
			fail(t, q, j, "order")
			failed = append([]string{id}, failed...)
		}
		if got := list(queue.StateDead, ""); !slices.Equal(got, failed) {
			t.Errorf("dead letters listed %v, want newest failure first %v", got, failed)
		}
	})

	checkAs(s, t, "QueueStats", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		states(t, q)
		pushN(t, q, "st2", 2)
		stats, err := in.QueueStats(t.Context())
		if err != nil {
			t.Fatalf("QueueStats: %v", err)
		}
		if !slices.IsSortedFunc(stats, func(a, b driver.QueueStats) int { return cmp.Compare(a.Queue, b.Queue) }) {
			t.Errorf("QueueStats not sorted by queue name: %+v", stats)
		}
		byName := make(map[string]driver.QueueStats)
		for _, st := range stats {
			byName[st.Queue] = st
		}
		st, ok := byName["st"]
		if !ok {
			t.Fatalf("QueueStats has no entry for queue st: %+v", stats)
		}
		if st.Ready.N != 1 || st.Scheduled.N != 1 || st.Running.N != 1 || st.Dead.N != 1 || st.Paused {
			t.Errorf("QueueStats(st) = %+v, want 1 ready, 1 scheduled, 1 running, 1 dead, not paused", st)
		}
		if st2 := byName["st2"]; st2.Ready.N != 2 || st2.Running.N != 0 {
			t.Errorf("QueueStats(st2) = %+v, want 2 ready", st2)
		}
	})

	checkAs(s, t, "Metrics", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		obs := driver.CapabilitiesOf(q).Reporter
		if obs == nil {
			t.Skip(lacks(q, "Reporter"))
		}
		now := time.Now()
		runs := []driver.RunRecord{
			{Queue: "met", Name: "contract", Start: now, Runtime: 10 * time.Millisecond, Wait: 5 * time.Millisecond, Outcome: driver.OutcomeDone, Attempts: 1},
			{Queue: "met", Name: "contract", Start: now, Runtime: 30 * time.Millisecond, Wait: 5 * time.Millisecond, Outcome: driver.OutcomeDone, Attempts: 1},
			{Queue: "met", Name: "other", Start: now, Runtime: 20 * time.Millisecond, Wait: 5 * time.Millisecond, Outcome: driver.OutcomeRetried, Attempts: 2},
		}
		want := map[string]*driver.MetricPoint{"contract": {}, "other": {}}
		for _, r := range runs {
			obs.ObserveRun(r)
			want[r.Name].Observe(r)
		}
		// Stores write what ObserveRun buffered with the process's next
		// heartbeat, never on a job's path; a read in the same process
		// includes its buffer.
		if err := obs.Heartbeat(t.Context(), driver.WorkerInfo{ID: "contract-metrics", Queues: []string{"met"}, Concurrency: 1}); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		t.Cleanup(func() { _ = obs.Deregister(context.WithoutCancel(t.Context()), "contract-metrics") })

		// sums adds up the points of queue met by job name, checking that
		// each starts a period of length span.
		sums := func(points []driver.MetricPoint, span time.Duration) map[string]*driver.MetricPoint {
			got := map[string]*driver.MetricPoint{}
			for _, p := range points {
				if p.Queue != "met" {
					continue
				}
				if !p.Minute.Equal(p.Minute.Truncate(span)) {
					t.Fatalf("metric point time %v is not the start of a %v", p.Minute, span)
				}
				if got[p.Name] == nil {
					got[p.Name] = &driver.MetricPoint{}
				}
				got[p.Name].Add(p)
			}
			return got
		}
		check := func(what string, got map[string]*driver.MetricPoint) {
			t.Helper()
			for name, w := range want {
				g := got[name]
				if g == nil {
					t.Errorf("%s: no points for job name %q of queue met: %v", what, name, got)
					continue
				}
				if *g != *w {
					t.Errorf("%s for job name %q = %+v, want %+v", what, name, *g, *w)
				}
			}
		}
		var sum driver.MetricPoint
		var byName map[string]*driver.MetricPoint
		eventually(t, "metrics of three observed runs", func() bool {
			points, err := in.Metrics(t.Context(), now.Add(-5*time.Minute))
			if err != nil {
				t.Fatalf("Metrics: %v", err)
			}
			byName = sums(points, time.Minute)
			sum = driver.MetricPoint{}
			for _, p := range byName {
				sum.Add(*p)
			}
			return sum.Processed+sum.Failed >= 3
		})
		if sum.Processed != 2 || sum.Failed != 1 || sum.TotalRuntime != 60*time.Millisecond ||
			sum.MaxRuntime != 30*time.Millisecond || sum.TotalWait != 15*time.Millisecond {
			t.Errorf("metrics for met = %+v, want 2 processed, 1 failed, 60ms total and 30ms max runtime, 15ms wait", sum)
		}
		check("Metrics", byName)
		// The p50 of 10, 20 and 30ms read from the merged buckets is
		// within the histogram's stated precision of 20ms.
		if p50 := sum.Runtimes.Quantile(0.5, sum.MaxRuntime); p50 < 20*time.Millisecond*10/15 || p50 > 20*time.Millisecond*15/10 {
			t.Errorf("p50 runtime of met = %v, want within a factor of √2 of 20ms", p50)
		}
		if hist := driver.CapabilitiesOf(q).History; hist != nil {
			points, err := hist.HourlyMetrics(t.Context(), now.Add(-time.Hour))
			if err != nil {
				t.Fatalf("HourlyMetrics: %v", err)
			}
			check("HourlyMetrics", sums(points, time.Hour))
		}
		stats, err := in.QueueStats(t.Context())
		if err != nil {
			t.Fatalf("QueueStats: %v", err)
		}
		for _, st := range stats {
			if st.Queue == "met" {
				if st.Processed != 2 || st.Failed != 1 || st.MaxRuntime != 30*time.Millisecond || st.AvgRuntime != 20*time.Millisecond || st.Window <= 0 {
					t.Errorf("QueueStats(met) = %+v, want 2 processed, 1 failed, 20ms average and 30ms max runtime, a window", st)
				}
				return
			}
		}
		t.Errorf("QueueStats has no entry for queue met, which has metrics: %+v", stats)
	})

	checkAs(s, t, "Cancelled", func(t *testing.T, q queue.Queue, in driver.Inspector) {
		ctx := cancelled(t)
		_, err := in.QueueStats(ctx)
		wantErr(t, "QueueStats with a cancelled context", err, context.Canceled)
		_, err = in.Metrics(ctx, time.Now().Add(-time.Hour))
		wantErr(t, "Metrics with a cancelled context", err, context.Canceled)
		_, err = in.ListJobs(ctx, driver.JobFilter{State: queue.StateReady})
		wantErr(t, "ListJobs with a cancelled context", err, context.Canceled)
		_, err = in.GetJob(ctx, driver.NewID())
		wantErr(t, "GetJob with a cancelled context", err, context.Canceled)
	})

	checkAs(s, t, "OldestReady", func(t *testing.T, q queue.Queue, r driver.Inspector) {
		now := time.Now().Truncate(time.Millisecond)
		at := func(queueName string, avail time.Time, prio int) queue.Job {
			j := newJob(queueName)
			j.AvailableAt, j.Priority = avail, prio
			push(t, q, j)
			return j
		}
		// The oldest job of "or" is running: it is not waiting any more.
		running := at("or", now.Add(-3*time.Hour), 0)
		reserveOne(t, q, "or", running.ID, longLease)
		at("or", now.Add(-time.Minute), 0)
		at("or", now.Add(-2*time.Hour), 0) // the oldest ready, queued after a newer one
		at("or", now.Add(-time.Hour), 5)   // another priority
		at("sched", now.Add(time.Hour), 0) // not yet due
		killJob(t, q, "dead", "gone")
		got, err := r.OldestReady(t.Context())
		if err != nil {
			t.Fatalf("OldestReady: %v", err)
		}
		want := now.Add(-2 * time.Hour)
		if len(got) != 1 || got["or"].Sub(want).Abs() > time.Millisecond {
			t.Fatalf("OldestReady = %v; want only queue or, at %v (its oldest ready job; running, scheduled and dead jobs do not count)", got, want)
		}
		_, err = r.OldestReady(cancelled(t))
		wantErr(t, "OldestReady with a cancelled context", err, context.Canceled)
	})
}

// testPauser checks driver.Controller.
func (s *suite) testPauser(t *testing.T) {
	checkAs(s, t, "PauseResume", func(t *testing.T, q queue.Queue, p driver.Controller) {
		a, b := newJob("pa"), newJob("pb")
		push(t, q, a)
		push(t, q, b)
		if err := p.Pause(t.Context(), "pa"); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		if err := p.Pause(t.Context(), "pa"); err != nil {
			t.Fatalf("Pause of a paused queue: %v", err)
		}
		paused, err := p.Paused(t.Context())
		if err != nil || !slices.Equal(paused, []string{"pa"}) {
			t.Fatalf("Paused() = %v, %v; want [pa]", paused, err)
		}
		got := reserve(t, q, []string{"pa", "pb"}, 10, longLease)
		if !slices.Equal(ids(got), []string{b.ID}) {
			t.Fatalf("Reserve([pa pb]) with pa paused = %v, want only pb's job %s", ids(got), b.ID)
		}
		wantLen(t, q, "pa", 1) // pushes still count while paused
		if err := p.Resume(t.Context(), "pa"); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		if err := p.Resume(t.Context(), "never-paused"); err != nil {
			t.Fatalf("Resume of a queue that is not paused: %v", err)
		}
		reserveOne(t, q, "pa", a.ID, longLease)
		paused, err = p.Paused(t.Context())
		if err != nil || len(paused) != 0 {
			t.Fatalf("Paused() after Resume = %v, %v; want none", paused, err)
		}
		if in := inspector(q); in != nil {
			if err := p.Pause(t.Context(), "pb"); err != nil {
				t.Fatalf("Pause: %v", err)
			}
			stats, err := in.QueueStats(t.Context())
			if err != nil {
				t.Fatalf("QueueStats: %v", err)
			}
			for _, st := range stats {
				if st.Queue == "pb" && !st.Paused {
					t.Errorf("QueueStats(pb) not paused after Pause: %+v", st)
				}
			}
		}
	})

	checkAs(s, t, "Cancelled", func(t *testing.T, q queue.Queue, p driver.Controller) {
		ctx := cancelled(t)
		wantErr(t, "Pause with a cancelled context", p.Pause(ctx, "pc"), context.Canceled)
		wantErr(t, "Resume with a cancelled context", p.Resume(ctx, "pc"), context.Canceled)
		_, err := p.Paused(ctx)
		wantErr(t, "Paused with a cancelled context", err, context.Canceled)
		paused, err := p.Paused(t.Context())
		if err != nil || len(paused) != 0 {
			t.Fatalf("Paused() = %v, %v after a cancelled Pause; want none", paused, err)
		}
	})
}

// registry is a store's worker registry: written through its Reporter,
// read through its Inspector.
type registry interface {
	Heartbeat(ctx context.Context, w driver.WorkerInfo) error
	Deregister(ctx context.Context, id string) error
	Workers(ctx context.Context) ([]driver.WorkerInfo, error)
}

// checkRegistry runs fn as a parallel subtest on a new queue whose
// registry it can write and read, and skips it, saying what the driver
// lacks, when it cannot.
func (s *suite) checkRegistry(t *testing.T, name string, fn func(t *testing.T, q queue.Queue, wr registry)) {
	t.Helper()
	s.check(t, name, func(t *testing.T, q queue.Queue) {
		caps := driver.CapabilitiesOf(q)
		for _, a := range []string{"Reporter", "Inspector"} {
			if err := caps.Require(a); err != nil {
				t.Skip(err)
			}
		}
		fn(t, q, struct {
			driver.Reporter
			driver.Inspector
		}{caps.Reporter, caps.Inspector})
	})
}

// testWorkerRegistry checks the worker registry (driver.Reporter's
// heartbeats, driver.Inspector's Workers).
func (s *suite) testWorkerRegistry(t *testing.T) {
	s.checkRegistry(t, "HeartbeatListDeregister", func(t *testing.T, q queue.Queue, wr registry) {
		started := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		w2 := driver.WorkerInfo{ID: "worker-2", Host: "host-b", PID: 202, Queues: []string{"b"}, Concurrency: 4, StartedAt: started}
		w1 := driver.WorkerInfo{ID: "worker-1", Host: "host-a", PID: 101, Queues: []string{"critical", "default"}, Concurrency: 16, StartedAt: started,
			MaxAttempts: 7}
		before := time.Now()
		for _, w := range []driver.WorkerInfo{w2, w1} {
			if err := wr.Heartbeat(t.Context(), w); err != nil {
				t.Fatalf("Heartbeat(%s): %v", w.ID, err)
			}
		}
		got, err := wr.Workers(t.Context())
		if err != nil {
			t.Fatalf("Workers: %v", err)
		}
		if len(got) != 2 || got[0].ID != "worker-1" || got[1].ID != "worker-2" {
			t.Fatalf("Workers() = %+v, want worker-1 and worker-2 sorted by ID", got)
		}
		g := got[0]
		if g.Host != w1.Host || g.PID != w1.PID || !slices.Equal(g.Queues, w1.Queues) || g.Concurrency != w1.Concurrency || g.MaxAttempts != w1.MaxAttempts {
			t.Errorf("Workers()[0] = %+v, want the fields of %+v", g, w1)
		}
		if got[1].MaxAttempts != 0 {
			t.Errorf("Workers()[1].MaxAttempts = %d for a worker that reported none, want 0", got[1].MaxAttempts)
		}
		s.wantTime(t, "StartedAt", g.StartedAt, started)
		s.wantBetween(t, "LastSeen", g.LastSeen, before, time.Now())

		time.Sleep(5 * s.tol)
		w1.MaxAttempts = 9 // a heartbeat replaces the last one's limit
		if err := wr.Heartbeat(t.Context(), w1); err != nil {
			t.Fatalf("second Heartbeat: %v", err)
		}
		if err := wr.Deregister(t.Context(), "worker-2"); err != nil {
			t.Fatalf("Deregister: %v", err)
		}
		got, err = wr.Workers(t.Context())
		if err != nil || len(got) != 1 || got[0].ID != "worker-1" {
			t.Fatalf("Workers() after Deregister = %+v, %v; want only worker-1", got, err)
		}
		if !got[0].LastSeen.After(g.LastSeen) {
			t.Errorf("LastSeen %v not later than %v after a second heartbeat", got[0].LastSeen, g.LastSeen)
		}
		if got[0].MaxAttempts != 9 {
			t.Errorf("MaxAttempts %d after a heartbeat reporting 9, want 9", got[0].MaxAttempts)
		}
		if err := wr.Deregister(t.Context(), "worker-unknown"); err != nil && !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("Deregister of an unknown worker: %v, want nil or ErrNotFound", err)
		}
	})

	s.checkRegistry(t, "HeldJobs", func(t *testing.T, q queue.Queue, wr registry) {
		// The jobs a worker holds are listed as its last heartbeat gave
		// them: each heartbeat replaces the last one's.
		heldOf := func() driver.WorkerInfo {
			t.Helper()
			got, err := wr.Workers(t.Context())
			if err != nil || len(got) != 1 {
				t.Fatalf("Workers() = %+v, %v; want one worker", got, err)
			}
			return got[0]
		}
		w := driver.WorkerInfo{ID: "holder", Host: "h", PID: 1, Queues: []string{"ha", "hb"}, Concurrency: 8,
			Running: map[string]int{"ha": 2, "hb": 1}, Reserved: map[string]int{"ha": 3}}
		if err := wr.Heartbeat(t.Context(), w); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		if g := heldOf(); !maps.Equal(g.Running, w.Running) || !maps.Equal(g.Reserved, w.Reserved) || g.Held("ha") != 5 {
			t.Errorf("Workers() lists Running %v, Reserved %v; want %v, %v", g.Running, g.Reserved, w.Running, w.Reserved)
		}
		w.Running, w.Reserved = nil, map[string]int{"hb": 1}
		if err := wr.Heartbeat(t.Context(), w); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		if g := heldOf(); len(g.Running) != 0 || !maps.Equal(g.Reserved, w.Reserved) {
			t.Errorf("after a heartbeat holding less, Workers() lists Running %v, Reserved %v; want none, %v", g.Running, g.Reserved, w.Reserved)
		}

		// The running jobs a Counter counts and an Inspector lists are
		// those the workers hold.
		c, in := inspector(q), inspector(q)
		if err := wr.Deregister(t.Context(), "holder"); err != nil {
			t.Fatalf("Deregister: %v", err)
		}
		const name = "held-jobs"
		pushN(t, q, name, 5)
		got := reserve(t, q, []string{name}, 3, longLease)
		if len(got) != 3 {
			t.Fatalf("reserved %d jobs, want 3", len(got))
		}
		check := func(step string, held []queue.Job, pending int64) {
			t.Helper()
			hold(t, q, held...)
			{
				counts, err := c.Counts(t.Context())
				if err != nil {
					t.Fatalf("Counts: %v", err)
				}
				var g driver.QueueCounts // zero when the queue is left out
				for _, qc := range counts {
					if qc.Queue == name {
						g = qc
					}
				}
				running := int64(len(held))
				if g.Pending != pending || g.Running != (driver.Count{N: running}) || g.Ready != (driver.Count{N: pending - running}) {
					t.Errorf("%s: Counts of %s = %+v; want %d pending, %d running, %d ready", step, name, g, pending, running, pending-running)
				}
			}
			{
				page, err := in.ListJobs(t.Context(), driver.JobFilter{State: queue.StateRunning, Queue: name})
				if err != nil {
					t.Fatalf("ListJobs(running): %v", err)
				}
				var listed []string
				for _, j := range page.Jobs {
					listed = append(listed, j.ID)
				}
				if w := ids(held); !slices.Equal(listed, w) {
					t.Errorf("%s: ListJobs(running) = %v, want the jobs held %v", step, listed, w)
				}
			}
		}
		check("three held", got, 5)
		ack(t, q, got[0])
		check("one acked", got[1:], 4)
		ack(t, q, got[1])
		ack(t, q, got[2])
		for _, j := range reserve(t, q, []string{name}, 10, longLease) {
			ack(t, q, j)
		}
		check("all acked", nil, 0)
	})

	s.checkRegistry(t, "Cancelled", func(t *testing.T, q queue.Queue, wr registry) {
		ctx := cancelled(t)
		wantErr(t, "Heartbeat with a cancelled context", wr.Heartbeat(ctx, driver.WorkerInfo{ID: "w"}), context.Canceled)
		wantErr(t, "Deregister with a cancelled context", wr.Deregister(ctx, "w"), context.Canceled)
		_, err := wr.Workers(ctx)
		wantErr(t, "Workers with a cancelled context", err, context.Canceled)
		got, err := wr.Workers(t.Context())
		if err != nil || len(got) != 0 {
			t.Fatalf("Workers() = %+v, %v after a cancelled Heartbeat; want none", got, err)
		}
	})
}
