package contracttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// testPush checks what Push stores: every field round-trips, empty IDs and
// CreatedAt are filled in, payloads are bytes.
func (s *suite) testPush(t *testing.T) {
	s.check(t, "FieldsRoundTrip", func(t *testing.T, q queue.Queue) {
		created := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		avail := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		in := queue.Job{
			ID:          driver.NewID(),
			Queue:       "fields",
			Name:        "SendWelcomeEmail",
			Payload:     []byte(`{"user_id":42,"name":"Zoë"}`),
			Priority:    -7,
			MaxAttempts: 9,
			Timeout:     1500 * time.Millisecond,
			UniqueKey:   "welcome:42",
			Tags:        []string{"email", "signup"},
			Meta:        map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme"},
			AvailableAt: avail,
			CreatedAt:   created,
		}
		push(t, q, in)
		before := time.Now()
		got := reserveOne(t, q, "fields", in.ID, longLease)
		after := time.Now()

		if got.Queue != in.Queue || got.Name != in.Name || got.Priority != in.Priority ||
			got.MaxAttempts != in.MaxAttempts || got.Timeout != in.Timeout || got.UniqueKey != in.UniqueKey {
			t.Errorf("reserved job = %+v,\nwant the fields of %+v", got, in)
		}
		if !bytes.Equal(got.Payload, in.Payload) {
			t.Errorf("Payload = %q, want %q", got.Payload, in.Payload)
		}
		if !slices.Equal(got.Tags, in.Tags) {
			t.Errorf("Tags = %q, want %q", got.Tags, in.Tags)
		}
		if !maps.Equal(got.Meta, in.Meta) {
			t.Errorf("Meta = %v, want %v", got.Meta, in.Meta)
		}
		s.wantTime(t, "CreatedAt", got.CreatedAt, created)
		s.wantTime(t, "AvailableAt", got.AvailableAt, avail)
		if got.Attempts != 1 {
			t.Errorf("Attempts = %d on first delivery, want 1", got.Attempts)
		}
		if got.LastError != "" {
			t.Errorf("LastError = %q on first delivery, want empty", got.LastError)
		}
		if got.LeaseToken == "" {
			t.Error("reserved job has an empty LeaseToken")
		}
		s.wantBetween(t, "LeaseExpiresAt", got.LeaseExpiresAt, before.Add(longLease), after.Add(longLease))
	})

	s.check(t, "EmptyFieldsRoundTrip", func(t *testing.T, q queue.Queue) {
		in := queue.Job{ID: driver.NewID(), Queue: "bare", Name: "Bare"}
		push(t, q, in)
		got := reserveOne(t, q, "bare", in.ID, longLease)
		if got.Priority != 0 || got.MaxAttempts != 0 || got.Timeout != 0 || got.UniqueKey != "" ||
			len(got.Tags) != 0 || len(got.Meta) != 0 || len(got.Payload) != 0 {
			t.Errorf("reserved job = %+v, want zero Priority, MaxAttempts, Timeout, UniqueKey, Tags, Meta, Payload", got)
		}
	})

	s.check(t, "FillsIDAndCreatedAt", func(t *testing.T, q queue.Queue) {
		before := time.Now()
		for range 2 {
			j := newJob("fill")
			j.ID = ""
			push(t, q, j)
		}
		after := time.Now()
		jobs := reserve(t, q, []string{"fill"}, 10, longLease)
		if len(jobs) != 2 {
			t.Fatalf("Reserve returned %d jobs, want the 2 pushed", len(jobs))
		}
		if jobs[0].ID == "" || jobs[1].ID == "" || jobs[0].ID == jobs[1].ID {
			t.Errorf("jobs pushed without an ID got IDs %q and %q, want two distinct non-empty IDs", jobs[0].ID, jobs[1].ID)
		}
		for _, j := range jobs {
			s.wantBetween(t, "CreatedAt of a job pushed without one", j.CreatedAt, before, after)
		}
	})

	s.check(t, "DefaultQueue", func(t *testing.T, q queue.Queue) {
		j := newJob("")
		push(t, q, j)
		wantLen(t, q, queue.DefaultQueue, 1)
		got := reserve(t, q, nil, 10, longLease)
		if len(got) != 1 || got[0].ID != j.ID {
			t.Fatalf("Reserve(nil) returned %v, want the job pushed with an empty queue %s", ids(got), j.ID)
		}
		if got[0].QueueName() != queue.DefaultQueue {
			t.Errorf("Queue = %q, want %q or empty", got[0].Queue, queue.DefaultQueue)
		}
	})

	s.check(t, "PayloadsAreBytes", func(t *testing.T, q queue.Queue) {
		large := bytes.Repeat([]byte("0123456789abcdef\x00"), 256<<10/17)
		payloads := map[string][]byte{
			"invalid JSON":     []byte(`{"unterminated": [1, 2`),
			"plain text":       []byte("hello, world\n"),
			"empty":            {},
			"nil":              nil,
			"NUL bytes":        {0, 0, 'a', 0, 'b', 0},
			"invalid UTF-8":    {0xff, 0xfe, 0xfd, 0x80, '{', '}'},
			"JSON with quotes": []byte(`{"q":"it's \"quoted\"; DROP TABLE jobs; --","u":"\u00e9\u2603"}`),
			"256 KiB binary":   large,
		}
		byID := make(map[string]string)
		for name, p := range payloads {
			j := newJob("payloads")
			j.Payload = p
			push(t, q, j)
			byID[j.ID] = name
		}
		jobs := reserve(t, q, []string{"payloads"}, len(payloads)+1, longLease)
		if len(jobs) != len(payloads) {
			t.Fatalf("Reserve returned %d jobs, want %d", len(jobs), len(payloads))
		}
		for _, j := range jobs {
			name := byID[j.ID]
			if want := payloads[name]; !bytes.Equal(j.Payload, want) {
				t.Errorf("payload %s came back as %d bytes %.40q, want %d bytes %.40q", name, len(j.Payload), j.Payload, len(want), want)
			}
		}
	})
}

// testOrder checks the reservation order: priority (higher first), then
// AvailableAt, then insertion, also across several queues.
func (s *suite) testOrder(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	type spec struct {
		name     string
		priority int
		avail    time.Duration // after base
	}
	// Pushed in this order; reserved in the order of want.
	specs := []spec{
		{"p5-late", 5, 3 * time.Second},
		{"p0-first", 0, 0},
		{"p-3", -3, 0},
		{"p10", 10, 5 * time.Second},
		{"p0-second", 0, 0},
		{"p5-early", 5, 1 * time.Second},
		{"p0-third", 0, 0},
	}
	want := []string{"p10", "p5-early", "p5-late", "p0-first", "p0-second", "p0-third", "p-3"}
	for _, batch := range []int{10, 3, 1} {
		s.check(t, fmt.Sprintf("Batch%d", batch), func(t *testing.T, q queue.Queue) {
			names := make(map[string]string)
			for _, sp := range specs {
				j := newJob("order")
				j.Priority = sp.priority
				j.AvailableAt = base.Add(sp.avail)
				push(t, q, j)
				names[j.ID] = sp.name
			}
			var got []string
			for len(got) < len(specs) {
				jobs := reserve(t, q, []string{"order"}, batch, longLease)
				if len(jobs) == 0 {
					t.Fatalf("Reserve returned nothing after %v, want %v", got, want)
				}
				for _, j := range jobs {
					got = append(got, names[j.ID])
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("reserved %d at a time in order %v, want %v", batch, got, want)
			}
		})
	}

	s.check(t, "BehindFullClaims", func(t *testing.T, q queue.Queue) {
		// Claims that take all they ask for, then a job ready before
		// every job they took (as a push whose transaction commits late
		// would be): the next Reserve with room for it takes it, first.
		// (A store may start a claim where the last full one ended; then
		// it must look behind when the claim comes back short.)
		var rest []string
		for i := range 6 {
			j := newJob("behind")
			j.AvailableAt = base.Add(time.Duration(i) * time.Second)
			push(t, q, j)
			if i >= 4 {
				rest = append(rest, j.ID)
			}
		}
		for range 2 {
			if got := reserve(t, q, []string{"behind"}, 2, longLease); len(got) != 2 {
				t.Fatalf("Reserve(2) returned %v, want 2 jobs", ids(got))
			}
		}
		late := newJob("behind")
		late.AvailableAt = base.Add(-time.Minute)
		push(t, q, late)
		got := reserve(t, q, []string{"behind"}, 10, longLease)
		if want := append([]string{late.ID}, rest...); !slices.Equal(ids(got), want) {
			t.Fatalf("after two full claims, Reserve(10) returned %v, want the job ready before them all %s, then %v", ids(got), late.ID, rest)
		}
	})

	s.check(t, "AcrossQueues", func(t *testing.T, q queue.Queue) {
		names := make(map[string]string)
		for i, qn := range []string{"x", "y", "x", "y"} {
			j := newJob(qn)
			j.Priority = i + 1
			j.AvailableAt = base
			push(t, q, j)
			names[j.ID] = qn + "-p" + string(rune('1'+i))
		}
		other := newJob("z")
		other.Priority = 100
		push(t, q, other)
		var got []string
		for _, j := range reserve(t, q, []string{"x", "y"}, 10, longLease) {
			got = append(got, names[j.ID])
		}
		if want := []string{"y-p4", "x-p3", "y-p2", "x-p1"}; !slices.Equal(got, want) {
			t.Errorf("Reserve([x y]) order %v, want %v (priority across the named queues, nothing from z)", got, want)
		}
	})

	s.check(t, "DistantTimes", func(t *testing.T, q queue.Queue) {
		old := newJob("far")
		old.AvailableAt = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
		push(t, q, old)
		for _, year := range []int{2040, 2500} { // past 2038 and past 2262 (int64 nanoseconds)
			j := newJob("far")
			j.AvailableAt = time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
			push(t, q, j)
		}
		wantLen(t, q, "far", 3)
		got := reserve(t, q, []string{"far"}, 10, longLease)
		if len(got) != 1 || got[0].ID != old.ID {
			t.Fatalf("Reserve = %v, want only the job available since 1900 %s (not those of 2040 and 2500)", ids(got), old.ID)
		}
		s.wantTime(t, "AvailableAt of 1900", got[0].AvailableAt, old.AvailableAt)
	})

	s.check(t, "Delay", func(t *testing.T, q queue.Queue) {
		now := time.Now()
		later := newJob("delay")
		later.AvailableAt = now.Add(500 * time.Millisecond)
		later.Priority = 10
		push(t, q, later)
		ready := newJob("delay")
		push(t, q, ready)
		wantLen(t, q, "delay", 2)
		var got queue.Job
		for _, j := range reserve(t, q, []string{"delay"}, 10, longLease) {
			if j.ID == later.ID {
				got = j // only legitimate if the delay has passed (checked below)
			}
		}
		if got.ID == "" {
			got = awaitReserve(t, q, "delay", longLease)
		}
		if at := time.Now(); got.ID != later.ID || at.Before(later.AvailableAt.Add(-s.tol)) {
			t.Fatalf("reserved %s at %v, want the delayed job %s no earlier than its AvailableAt %v", got.ID, at, later.ID, later.AvailableAt)
		}
		s.wantTime(t, "AvailableAt of the delayed job", got.AvailableAt, later.AvailableAt)
	})
}

// testUnique checks unique keys and active IDs.
func (s *suite) testUnique(t *testing.T) {
	// wantDup pushes j and fails unless the push is a duplicate of holder.
	wantDup := func(t *testing.T, q queue.Queue, j queue.Job, holder string) {
		t.Helper()
		err := q.Push(t.Context(), j)
		if !errors.Is(err, queue.ErrDuplicate) {
			t.Fatalf("Push of a duplicate (key %q, id %s) returned %v, want an error matching ErrDuplicate", j.UniqueKey, j.ID, err)
		}
		var de *driver.DuplicateError
		if errors.As(err, &de) && de.ExistingID != "" && de.ExistingID != holder {
			t.Errorf("DuplicateError.ExistingID = %s, want %s", de.ExistingID, holder)
		}
	}
	keyed := func(queueName, key string) queue.Job {
		j := newJob(queueName)
		j.UniqueKey = key
		return j
	}

	s.check(t, "HeldWhileReady", func(t *testing.T, q queue.Queue) {
		first := keyed("u", "k")
		push(t, q, first)
		wantDup(t, q, keyed("u", "k"), first.ID)
		wantLen(t, q, "u", 1)
		push(t, q, keyed("u-other", "k")) // same key, another queue: fine
		push(t, q, keyed("u", "k2"))
		wantLen(t, q, "u", 2)
		got := reserveOne(t, q, "u-other", "", longLease)
		if got.UniqueKey != "k" {
			t.Errorf("UniqueKey = %q, want k", got.UniqueKey)
		}
	})

	s.check(t, "HeldWhileScheduled", func(t *testing.T, q queue.Queue) {
		first := keyed("u", "k")
		first.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, first)
		wantDup(t, q, keyed("u", "k"), first.ID)
		wantLen(t, q, "u", 1)
	})

	s.check(t, "HeldWhileRunningAndAfterNack", func(t *testing.T, q queue.Queue) {
		first := keyed("u", "k")
		push(t, q, first)
		r := reserveOne(t, q, "u", first.ID, longLease)
		wantDup(t, q, keyed("u", "k"), first.ID)
		nack(t, q, r, time.Now().Add(time.Hour), "retry later")
		wantDup(t, q, keyed("u", "k"), first.ID)
		wantLen(t, q, "u", 1)
	})

	s.check(t, "FreedByAck", func(t *testing.T, q queue.Queue) {
		first := keyed("u", "k")
		push(t, q, first)
		ack(t, q, reserveOne(t, q, "u", first.ID, longLease))
		second := keyed("u", "k")
		push(t, q, second)
		reserveOne(t, q, "u", second.ID, longLease)
	})

	s.check(t, "FreedByDeadLetter", func(t *testing.T, q queue.Queue) {
		first := keyed("u", "k")
		push(t, q, first)
		fail(t, q, reserveOne(t, q, "u", first.ID, longLease), "boom")
		second := keyed("u", "k")
		push(t, q, second)
		reserveOne(t, q, "u", second.ID, longLease)
		if dl := deadLetters(t, q, "u", 10); len(dl) != 1 || dl[0].ID != first.ID {
			t.Errorf("dead letters %v, want the first job %s still there", ids(dl), first.ID)
		}
	})

	s.check(t, "FreedByPurge", func(t *testing.T, q queue.Queue) {
		push(t, q, keyed("u", "k"))
		if _, err := q.Purge(t.Context(), "u"); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		push(t, q, keyed("u", "k"))
		wantLen(t, q, "u", 1)
	})

	s.check(t, "ConcurrentPushesOfOneKey", func(t *testing.T, q queue.Queue) {
		// Pushes of the same unique keys from many goroutines at once,
		// as many processes enqueue: each is stored or a duplicate, never
		// another error (a deadlock the store broke is its own business),
		// and one job per key is left.
		const pushers, keys, rounds = 8, 4, 5
		errs := make(chan error, pushers*keys*rounds)
		var wg sync.WaitGroup
		for range pushers {
			wg.Go(func() {
				for r := range rounds {
					for k := range keys {
						err := q.Push(t.Context(), keyed("race", fmt.Sprintf("k%d-%d", k, r)))
						if err != nil && !errors.Is(err, queue.ErrDuplicate) {
							errs <- err
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent Push of a unique key: %v, want nil or an error matching ErrDuplicate", err)
		}
		wantLen(t, q, "race", keys*rounds)
	})

	s.check(t, "ConcurrentPushesEachAnswered", func(t *testing.T, q queue.Queue) {
		// Many goroutines pushing at once, as a web service's requests
		// do: a store may write them together (sqlqueue and redisqueue
		// group the pushes that wait for a push lane), but each Push is
		// answered for its own job: every new job is stored once with
		// its own fields, and every push of an active job's ID is a
		// duplicate, whatever it was pushed beside.
		held := newJob("each")
		push(t, q, held)
		const pushers, each = 32, 12
		type result struct {
			j   queue.Job
			err error
		}
		results := make(chan result, pushers*each)
		var wg sync.WaitGroup
		for p := range pushers {
			wg.Go(func() {
				for i := range each {
					j := newJob("each")
					j.Priority = p*each + i
					if i%4 == 3 {
						j = held
					} else if i%2 == 1 {
						j.ID = "" // the store names it
					}
					results <- result{j, q.Push(t.Context(), j)}
				}
			})
		}
		wg.Wait()
		close(results)
		want := map[string]int{string(held.Payload): held.Priority} // priority by payload, of the jobs left
		for r := range results {
			switch {
			case r.j.ID == held.ID:
				if !errors.Is(r.err, queue.ErrDuplicate) {
					t.Errorf("a concurrent Push of an active job's ID: %v, want an error matching ErrDuplicate", r.err)
				}
			case r.err != nil:
				t.Errorf("a concurrent Push of a new job: %v", r.err)
			default:
				want[string(r.j.Payload)] = r.j.Priority
			}
		}
		jobs := reserve(t, q, []string{"each"}, len(want)+10, longLease)
		if len(jobs) != len(want) {
			t.Fatalf("Reserve found %d jobs, want %d: one per new job and the held one", len(jobs), len(want))
		}
		for _, j := range jobs {
			if p, ok := want[string(j.Payload)]; !ok || p != j.Priority {
				t.Errorf("job %s holds payload %q at priority %d: no stored push sent that (wanted priority %d, found %v), or two jobs hold it", j.ID, j.Payload, j.Priority, p, ok)
			}
			delete(want, string(j.Payload))
		}
	})

	s.check(t, "ActiveID", func(t *testing.T, q queue.Queue) {
		first := newJob("ids")
		push(t, q, first)
		again := first
		again.Payload = []byte(`{"second":true}`)
		wantDup(t, q, again, first.ID) // ready
		r := reserveOne(t, q, "ids", first.ID, longLease)
		if !bytes.Equal(r.Payload, first.Payload) {
			t.Fatalf("payload %q after a duplicate push, want the first %q", r.Payload, first.Payload)
		}
		wantDup(t, q, again, first.ID) // running
		nack(t, q, r, time.Now().Add(time.Hour), "later")
		wantDup(t, q, again, first.ID) // scheduled
		if s.h.Caps.IDsPerQueue != "" {
			t.Logf("IDs across queues not checked: %s", s.h.Caps.IDsPerQueue)
		} else {
			elsewhere := again
			elsewhere.Queue = "ids-other"
			wantDup(t, q, elsewhere, first.ID) // IDs are unique across queues
		}
		wantLen(t, q, "", 1)
	})

	s.check(t, "FinishedIDIsFree", func(t *testing.T, q queue.Queue) {
		first := newJob("ids")
		push(t, q, first)
		ack(t, q, reserveOne(t, q, "ids", first.ID, longLease))
		again := first
		again.Payload = []byte(`{"again":true}`)
		push(t, q, again)
		r := reserveOne(t, q, "ids", first.ID, longLease)
		if r.Attempts != 1 || !bytes.Equal(r.Payload, again.Payload) {
			t.Errorf("re-pushed finished job: Attempts %d, payload %q; want 1 and %q", r.Attempts, r.Payload, again.Payload)
		}
	})
}

// testReserve checks batch limits, queue selection and a Reserve on
// nothing.
func (s *suite) testReserve(t *testing.T) {
	s.check(t, "BatchLimits", func(t *testing.T, q queue.Queue) {
		a := pushN(t, q, "a", 10)
		b := pushN(t, q, "b", 2)
		c := pushN(t, q, "c", 3)
		got := reserve(t, q, []string{"a"}, 3, longLease)
		if want := ids(a[:3]); !slices.Equal(ids(got), want) {
			t.Fatalf("Reserve([a], 3) = %v, want the first three of a %v", ids(got), want)
		}
		got = reserve(t, q, []string{"a", "b"}, 100, longLease)
		if want := sorted(append(ids(a[3:]), ids(b)...)...); !slices.Equal(sortedIDs(got), want) {
			t.Fatalf("Reserve([a b], 100) = %v, want the rest of a and all of b %v", sortedIDs(got), want)
		}
		got = reserve(t, q, []string{"c"}, 1, longLease)
		if len(got) != 1 || got[0].ID != c[0].ID {
			t.Fatalf("Reserve([c], 1) = %v, want [%s]", ids(got), c[0].ID)
		}
		expectNone(t, q, "a", "b")
		wantLen(t, q, "", 15)
	})

	s.check(t, "NonPositiveMax", func(t *testing.T, q queue.Queue) {
		pushN(t, q, "np", 3)
		for _, max := range []int{0, -1} {
			// An error is allowed; a job is not: "up to max".
			if jobs, _ := q.Reserve(t.Context(), []string{"np"}, max, longLease); len(jobs) != 0 {
				t.Fatalf("Reserve(max %d) returned %d jobs, want none", max, len(jobs))
			}
		}
		if got := reserve(t, q, []string{"np"}, 10, longLease); len(got) != 3 || got[0].Attempts != 1 {
			t.Fatalf("after Reserve with max 0 and -1, Reserve returned %d jobs (first with Attempts %d), want all 3 untouched", len(got), got[0].Attempts)
		}
	})

	s.check(t, "Empty", func(t *testing.T, q queue.Queue) {
		expectNone(t, q, "nothing-here")
		expectNone(t, q)
	})

	s.check(t, "AttemptsAndTokens", func(t *testing.T, q queue.Queue) {
		pushN(t, q, "tok", 5)
		jobs := reserve(t, q, []string{"tok"}, 5, longLease)
		tokens := make(map[string]bool)
		for _, j := range jobs {
			if j.Attempts != 1 || j.LeaseToken == "" || j.LeaseExpiresAt.IsZero() {
				t.Errorf("job %s: Attempts %d, LeaseToken %q, LeaseExpiresAt %v; want 1 and a lease", j.ID, j.Attempts, j.LeaseToken, j.LeaseExpiresAt)
			}
			if tokens[j.LeaseToken] {
				t.Errorf("lease token %q handed out twice", j.LeaseToken)
			}
			tokens[j.LeaseToken] = true
		}
	})
}

// testLenPurge checks Len and Purge across states and queues.
func (s *suite) testLenPurge(t *testing.T) {
	s.check(t, "LenAndPurge", func(t *testing.T, q queue.Queue) {
		pushN(t, q, "lp", 4) // one will run, one will die, two stay ready
		for range 2 {
			j := newJob("lp")
			j.AvailableAt = time.Now().Add(time.Hour)
			push(t, q, j)
		}
		pushN(t, q, "lp-other", 1)
		running := reserve(t, q, []string{"lp"}, 2, longLease)
		if len(running) != 2 {
			t.Fatalf("Reserve returned %d jobs, want 2", len(running))
		}
		fail(t, q, running[1], "dead")
		wantLen(t, q, "lp", 5) // 2 ready, 2 scheduled, 1 running; the dead letter is not counted
		wantLen(t, q, "lp-other", 1)
		wantLen(t, q, "", 6)
		wantLen(t, q, "no-such-queue", 0)

		n, err := q.Purge(t.Context(), "lp")
		if err != nil || n != 4 {
			t.Fatalf("Purge(lp) = %d, %v; want 4 (ready and scheduled), nil", n, err)
		}
		wantLen(t, q, "lp", 1)
		wantLen(t, q, "lp-other", 1)
		if dl := deadLetters(t, q, "lp", 10); len(dl) != 1 {
			t.Fatalf("dead letters after Purge: %v, want the one dead letter kept", ids(dl))
		}
		expectNone(t, q, "lp")
		ack(t, q, running[0]) // the running job was left alone

		n, err = q.Purge(t.Context(), "")
		if err != nil || n != 1 {
			t.Fatalf("Purge(\"\") = %d, %v; want 1, nil", n, err)
		}
		wantLen(t, q, "", 0)
		expectNone(t, q, "lp-other")
	})
}

// testContext checks that every method honours a cancelled context and
// changes nothing.
func (s *suite) testContext(t *testing.T) {
	s.check(t, "Cancelled", func(t *testing.T, q queue.Queue) {
		ctx := cancelled(t)
		wantCanceled := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled context: error %v, want one matching context.Canceled", what, err)
			}
		}
		j := newJob("ctx")
		wantCanceled("Push", q.Push(ctx, j))
		wantLen(t, q, "ctx", 0)

		push(t, q, j)
		_, err := q.Reserve(ctx, []string{"ctx"}, 10, longLease)
		wantCanceled("Reserve", err)
		r := reserveOne(t, q, "ctx", j.ID, longLease)
		if r.Attempts != 1 {
			t.Errorf("Attempts = %d after a cancelled Reserve and a real one, want 1", r.Attempts)
		}

		wantCanceled("Ack", ackLease(ctx, q, r.Lease()))
		wantCanceled("Nack", nackLease(ctx, q, r.Lease(), time.Now(), "x"))
		wantCanceled("Fail", failLease(ctx, q, r.Lease(), "x"))
		wantCanceled("Extend", extendLease(ctx, q, r.Lease(), time.Hour))
		_, err = q.Len(ctx, "ctx")
		wantCanceled("Len", err)
		_, err = q.Purge(ctx, "ctx")
		wantCanceled("Purge", err)
		wantLen(t, q, "ctx", 1)
		expectNone(t, q, "ctx")

		fail(t, q, r, "dead") // the lease survived every cancelled call
		_, err = q.DeadLetters(ctx, "ctx", 10)
		wantCanceled("DeadLetters", err)
		wantCanceled("RetryDead", q.RetryDead(ctx, j.ID))
		wantCanceled("ForgetDead", q.ForgetDead(ctx, j.ID))
		_, err = q.FlushDead(ctx, "ctx")
		wantCanceled("FlushDead", err)
		if dl := deadLetters(t, q, "ctx", 10); len(dl) != 1 || dl[0].ID != j.ID {
			t.Fatalf("dead letters %v after cancelled calls, want [%s]", ids(dl), j.ID)
		}
		wantLen(t, q, "ctx", 0)
	})
}

// testTx checks transactional enqueue (Harness.Tx).
func (s *suite) testTx(t *testing.T) {
	if s.h.Tx == nil {
		t.Skip("Harness.Tx is nil: the driver has no transactional enqueue")
	}
	s.check(t, "VisibleIffCommitted", func(t *testing.T, q queue.Queue) {
		committed := newJob("tx")
		p, commit, _ := s.h.Tx(t, q)
		push(t, p, committed)
		if err := commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		rolledBack := newJob("tx")
		p, _, rollback := s.h.Tx(t, q)
		push(t, p, rolledBack)
		if err := rollback(); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		wantLen(t, q, "tx", 1)
		reserveOne(t, q, "tx", committed.ID, longLease)
	})

	s.check(t, "DuplicateKeepsTxUsable", func(t *testing.T, q queue.Queue) {
		held := newJob("tx")
		held.UniqueKey = "k"
		push(t, q, held)
		p, commit, _ := s.h.Tx(t, q)
		dup := newJob("tx")
		dup.UniqueKey = "k"
		if err := p.Push(t.Context(), dup); !errors.Is(err, queue.ErrDuplicate) {
			t.Fatalf("Push of a duplicate in a transaction: %v, want ErrDuplicate", err)
		}
		after := newJob("tx")
		push(t, p, after) // the transaction must still work after a duplicate
		if err := commit(); err != nil {
			t.Fatalf("commit after a duplicate push: %v", err)
		}
		got := reserve(t, q, []string{"tx"}, 10, longLease)
		if want := sorted(held.ID, after.ID); !slices.Equal(sortedIDs(got), want) {
			t.Fatalf("after commit reserved %v, want %v", sortedIDs(got), want)
		}
	})
}
