package contracttest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// seqMember returns a new job of queueName in the sequence key, releasing
// it when dead if release.
func seqMember(queueName, key string, release bool) queue.Job {
	j := newJob(queueName)
	j.Meta = map[string]string{driver.MetaSequence: key}
	if release {
		j.Meta[driver.MetaSequenceRelease] = "dead"
	}
	return j
}

// seqMembers pushes n members of key to queueName, in order.
func seqMembers(t *testing.T, q queue.Queue, queueName, key string, n int) []queue.Job {
	t.Helper()
	out := make([]queue.Job, n)
	for i := range out {
		out[i] = seqMember(queueName, key, false)
		push(t, q, out[i])
	}
	return out
}

// finishSeq records outcome o for j through Complete as the Worker does,
// with j's sequence in the Completion.
func finishSeq(t *testing.T, q queue.Queue, j queue.Job, o driver.Outcome) {
	t.Helper()
	c := driver.Completion{Lease: j.Lease(), Outcome: o, Reason: "contract " + o.String()}
	c.Sequence, c.ReleaseOnDead = driver.SequenceOf(j)
	if err := completeOne(t.Context(), q, c); err != nil {
		t.Fatalf("Complete(job %s, %s): %v", j.ID, o, err)
	}
}

// testSequences checks driver.Sequencer: only the head of a sequence is
// reserved, in push order, keys in parallel; a retry, a delay and an
// expired lease keep the head; a dead head holds the sequence unless its
// dispatch released it or an operator does; a retried dead head runs
// again as the head; cancelling, purging or forgetting a head lets the
// next run; jobs outside sequences are not held. Every store refuses a bad
// member the same way (Validate).
func (s *suite) testSequences(t *testing.T) {
	s.check(t, "BadMembersRefused", func(t *testing.T, q queue.Queue) {
		long := seqMember("seq-bad", strings.Repeat("k", driver.MaxKeyBytes+1), false)
		empty := seqMember("seq-bad", "", false)
		grouped := seqMember("seq-bad", "k", false)
		grouped.Meta[driver.MetaGroup] = "g"
		for _, j := range []queue.Job{long, empty, grouped} {
			if err := q.Push(t.Context(), j); !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("Push(member %+v) = %v, want ErrInvalid", j.Meta, err)
			}
			if _, err := q.PushMany(t.Context(), []queue.Job{newJob("seq-bad"), j}); !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("PushMany(member %+v) = %v, want ErrInvalid", j.Meta, err)
			}
		}
		wantLen(t, q, "seq-bad", 0)
	})
	checkAs(s, t, "HeadOnlyInOrder", func(t *testing.T, q queue.Queue, _ driver.Sequencer) {
		a := seqMembers(t, q, "seq-order", "a", 3)
		b := seqMembers(t, q, "seq-order", "b", 2)
		plain := newJob("seq-order")
		push(t, q, plain)
		other := seqMember("seq-order-2", "a", false) // the same key on another queue
		push(t, q, other)
		wantLen(t, q, "seq-order", 6)
		got := reserve(t, q, []string{"seq-order", "seq-order-2"}, 10, longLease)
		if want := []string{a[0].ID, b[0].ID, plain.ID, other.ID}; !sameIDs(ids(got), want) {
			t.Fatalf("Reserve gave %v, want the heads and the job outside sequences %v", ids(got), want)
		}
		expectNone(t, q, "seq-order")
		if in := inspector(q); in != nil {
			info, err := in.GetJob(t.Context(), a[2].ID)
			if err != nil || info.State != driver.StateSequenced {
				t.Errorf("GetJob(waiting member) = %q, %v; want sequenced", info.State, err)
			}
			page, err := in.ListJobs(t.Context(), driver.JobFilter{State: driver.StateSequenced, Queue: "seq-order"})
			if err != nil || len(page.Jobs) != 3 {
				t.Errorf("ListJobs(sequenced) = %d jobs, %v; want 3", len(page.Jobs), err)
			}
			counts, err := in.Counts(t.Context())
			if err != nil {
				t.Fatalf("Counts: %v", err)
			}
			for _, c := range counts {
				if c.Queue == "seq-order" && c.Sequenced != 3 {
					t.Errorf("Counts: %d sequenced, want 3", c.Sequenced)
				}
			}
		}
		if err := q.Push(t.Context(), a[1]); !errors.Is(err, queue.ErrDuplicate) {
			t.Errorf("Push of a waiting member's ID = %v, want ErrDuplicate", err)
		}
		for i, j := range got {
			if j.ID == a[0].ID {
				finishSeq(t, q, got[i], driver.OutcomeDone)
			}
		}
		next := reserveOne(t, q, "seq-order", a[1].ID, longLease)
		finishSeq(t, q, next, driver.OutcomeDone)
		reserveOne(t, q, "seq-order", a[2].ID, longLease)
		wantLen(t, q, "seq-order", 4) // a[2], b[0] and plain run, b[1] waits
	})
	checkAs(s, t, "PushManyInOrder", func(t *testing.T, q queue.Queue, _ driver.Sequencer) {
		ms := []queue.Job{seqMember("seq-many", "k", false), seqMember("seq-many", "k", false), seqMember("seq-many", "k", false)}
		stored, err := q.PushMany(t.Context(), ms)
		if err != nil {
			t.Fatalf("PushMany: %v", err)
		}
		for i, ok := range stored {
			if !ok {
				t.Fatalf("PushMany stored %v", stored)
			}
			j := reserveOne(t, q, "seq-many", ms[i].ID, longLease)
			expectNone(t, q, "seq-many")
			finishSeq(t, q, j, driver.OutcomeDone)
		}
		wantLen(t, q, "seq-many", 0)
	})
	checkAs(s, t, "ConcurrentReserversKeepOrder", func(t *testing.T, q queue.Queue, _ driver.Sequencer) {
		const keys, per = 4, 8
		var all []queue.Job
		for i := range per {
			for k := range keys {
				j := seqMember("seq-race", fmt.Sprint("k", k), false)
				j.Meta["i"] = fmt.Sprint(i)
				all = append(all, j)
			}
		}
		if _, err := q.PushMany(t.Context(), all); err != nil {
			t.Fatalf("PushMany: %v", err)
		}
		qs := []queue.Queue{q, q, q}
		if s.h.Peer != nil {
			p := s.h.Peer(t, q)
			qs = append(qs, p, p)
		}
		var mu sync.Mutex
		next := map[string]int{}      // key -> index of the member that may start
		running := map[string]bool{}  // key -> a member runs
		parallel := map[string]bool{} // keys seen running at once with another key
		done := 0
		var wg sync.WaitGroup
		for _, r := range qs {
			wg.Go(func() {
				deadline := time.Now().Add(patience)
				for time.Now().Before(deadline) {
					mu.Lock()
					finished := done == keys*per
					mu.Unlock()
					if finished {
						return
					}
					jobs, err := r.Reserve(t.Context(), []string{"seq-race"}, 2, longLease)
					if err != nil {
						t.Errorf("Reserve: %v", err)
						return
					}
					mu.Lock()
					for _, j := range jobs {
						key := j.Meta[driver.MetaSequence]
						if want := fmt.Sprint(next[key]); j.Meta["i"] != want || running[key] {
							t.Errorf("member %s of %s started while %d was due (running: %v): the sequence was overtaken",
								j.Meta["i"], key, next[key], running[key])
						}
						running[key] = true
						if len(running) > 1 {
							parallel[key] = true
						}
					}
					mu.Unlock()
					for _, j := range jobs {
						// The mark and the ack under one lock: a reserver
						// handed the next member before this ack committed
						// finds the mark not yet moved.
						key := j.Meta[driver.MetaSequence]
						mu.Lock()
						c := driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Sequence: key}
						if err := completeOne(t.Context(), r, c); err != nil {
							t.Errorf("Complete(%s): %v", j.ID, err)
						}
						next[key]++
						delete(running, key)
						done++
						mu.Unlock()
					}
					if len(jobs) == 0 {
						runtime.Gosched()
					}
				}
				t.Errorf("the members were not all run within %v", patience)
			})
		}
		wg.Wait()
		for k := range keys {
			if key := fmt.Sprint("k", k); next[key] != per {
				t.Errorf("%s ran %d members, want %d", key, next[key], per)
			}
		}
		if len(parallel) == 0 {
			t.Errorf("no two keys ran at once: keys are not in parallel")
		}
		wantLen(t, q, "seq-race", 0)
	})
	checkAs(s, t, "RetryDelayAndLeaseHold", func(t *testing.T, q queue.Queue, _ driver.Sequencer) {
		ms := seqMembers(t, q, "seq-retry", "k", 2)
		head := reserveOne(t, q, "seq-retry", ms[0].ID, longLease)
		finishSeq(t, q, head, driver.OutcomeRetried) // at once
		head = reserveOne(t, q, "seq-retry", ms[0].ID, shortLease)
		eventually(t, "the head handed out again after its lease's end", func() bool {
			jobs := reserve(t, q, []string{"seq-retry"}, 10, longLease)
			if len(jobs) > 0 && (len(jobs) != 1 || jobs[0].ID != ms[0].ID) {
				t.Fatalf("after the head's lease expired Reserve gave %v, want the head", ids(jobs))
			}
			if len(jobs) == 1 {
				head = jobs[0]
			}
			return len(jobs) == 1
		})
		c := driver.Completion{Lease: head.Lease(), Outcome: driver.OutcomeRetried, At: time.Now().Add(time.Hour), Sequence: "k"}
		if err := completeOne(t.Context(), q, c); err != nil {
			t.Fatalf("Complete(retry in an hour): %v", err)
		}
		expectNone(t, q, "seq-retry") // the backoff holds the sequence

		late := seqMember("seq-delay", "k", false)
		late.AvailableAt = time.Now().Add(time.Hour)
		push(t, q, late)
		after := seqMember("seq-delay", "k", false)
		push(t, q, after)
		expectNone(t, q, "seq-delay") // a delayed head holds the members after it
		if c := controller(q); c != nil {
			if _, err := c.Cancel(t.Context(), late.ID); err != nil {
				t.Fatalf("Cancel(delayed head): %v", err)
			}
			reserveOne(t, q, "seq-delay", after.ID, longLease)
		}
	})
	checkAs(s, t, "DeadHolds", func(t *testing.T, q queue.Queue, sq driver.Sequencer) {
		ms := seqMembers(t, q, "seq-dead", "k", 2)
		plain := newJob("seq-dead")
		push(t, q, plain)
		var head queue.Job
		for _, j := range reserve(t, q, []string{"seq-dead"}, 10, longLease) {
			if j.ID == plain.ID {
				ack(t, q, j)
			} else {
				head = j
			}
		}
		if head.ID != ms[0].ID {
			t.Fatalf("reserved %q, want the head %s", head.ID, ms[0].ID)
		}
		finishSeq(t, q, head, driver.OutcomeFailed)
		reserveAllExcept(t, q, "seq-dead", plain.ID)
		held, err := sq.HeldSequences(t.Context(), "seq-dead", 0)
		if err != nil {
			t.Fatalf("HeldSequences: %v", err)
		}
		if len(held) != 1 || held[0].Key != "k" || held[0].Queue != "seq-dead" || held[0].Head.ID != ms[0].ID ||
			held[0].Waiting != 1 || held[0].Head.State != queue.StateDead {
			t.Fatalf("HeldSequences = %+v, want k held by %s with 1 waiting", held, ms[0].ID)
		}
		if held, err := sq.HeldSequences(t.Context(), "elsewhere", 0); err != nil || len(held) != 0 {
			t.Errorf("HeldSequences(another queue) = %d, %v; want none", len(held), err)
		}
		// A retried dead head runs again as the head.
		if err := q.RetryDead(t.Context(), ms[0].ID); err != nil {
			t.Fatalf("RetryDead(head): %v", err)
		}
		head = reserveOne(t, q, "seq-dead", ms[0].ID, longLease)
		expectNone(t, q, "seq-dead")
		finishSeq(t, q, head, driver.OutcomeFailed)
		if c := controller(q); c != nil {
			amend(t, c, ms[0].ID, driver.Amendment{Op: driver.AmendRetry, Action: driver.Action{By: "contract", What: "retried"}})
			head = reserveOne(t, q, "seq-dead", ms[0].ID, longLease)
			expectNone(t, q, "seq-dead")
			finishSeq(t, q, head, driver.OutcomeDone)
		} else {
			if err := q.RetryDead(t.Context(), ms[0].ID); err != nil {
				t.Fatalf("RetryDead(head): %v", err)
			}
			finishSeq(t, q, reserveOne(t, q, "seq-dead", ms[0].ID, longLease), driver.OutcomeDone)
		}
		reserveOne(t, q, "seq-dead", ms[1].ID, longLease)
	})
	checkAs(s, t, "ReleaseOnDead", func(t *testing.T, q queue.Queue, sq driver.Sequencer) {
		first := seqMember("seq-rel", "k", true)
		second := seqMember("seq-rel", "k", false)
		push(t, q, first)
		push(t, q, second)
		finishSeq(t, q, reserveOne(t, q, "seq-rel", first.ID, longLease), driver.OutcomeFailed)
		reserveOne(t, q, "seq-rel", second.ID, longLease)
		if held, err := sq.HeldSequences(t.Context(), "", 0); err != nil || len(held) != 0 {
			t.Errorf("HeldSequences = %+v, %v; want none (released on dead)", held, err)
		}
		if len(deadLetters(t, q, "seq-rel", 10)) != 1 {
			t.Errorf("the released head is not a dead letter")
		}
	})
	checkAs(s, t, "OperatorRelease", func(t *testing.T, q queue.Queue, sq driver.Sequencer) {
		ms := seqMembers(t, q, "seq-op", "k", 3)
		if err := sq.ReleaseSequence(t.Context(), "seq-op", "k"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("ReleaseSequence(a sequence whose head is ready) = %v, want ErrNotFound", err)
		}
		if err := sq.ReleaseSequence(t.Context(), "seq-op", "nope"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("ReleaseSequence(unknown) = %v, want ErrNotFound", err)
		}
		finishSeq(t, q, reserveOne(t, q, "seq-op", ms[0].ID, longLease), driver.OutcomeFailed)
		expectNone(t, q, "seq-op")
		if err := sq.ReleaseSequence(t.Context(), "seq-op", "k"); err != nil {
			t.Fatalf("ReleaseSequence: %v", err)
		}
		if err := sq.ReleaseSequence(t.Context(), "seq-op", "k"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("a second ReleaseSequence = %v, want ErrNotFound", err)
		}
		second := reserveOne(t, q, "seq-op", ms[1].ID, longLease)
		if d := deadLetters(t, q, "seq-op", 10); len(d) != 1 || d[0].ID != ms[0].ID {
			t.Errorf("DeadLetters after the release = %v, want the released head", ids(d))
		}
		// The released head, retried, runs outside its sequence.
		if err := q.RetryDead(t.Context(), ms[0].ID); err != nil {
			t.Fatalf("RetryDead(released head): %v", err)
		}
		outside := reserveOne(t, q, "seq-op", ms[0].ID, longLease)
		finishSeq(t, q, outside, driver.OutcomeDone)
		expectNone(t, q, "seq-op") // its end does not move the sequence
		finishSeq(t, q, second, driver.OutcomeDone)
		reserveOne(t, q, "seq-op", ms[2].ID, longLease)
	})
	checkAs(s, t, "CancelForgetPurgeRelease", func(t *testing.T, q queue.Queue, _ driver.Sequencer) {
		if c := controller(q); c != nil {
			ms := seqMembers(t, q, "seq-cancel", "k", 4)
			if was, err := c.Cancel(t.Context(), ms[1].ID); err != nil || was != driver.StateSequenced {
				t.Fatalf("Cancel(waiting member) = %q, %v; want sequenced", was, err)
			}
			if _, err := c.Cancel(t.Context(), ms[0].ID); err != nil {
				t.Fatalf("Cancel(ready head): %v", err)
			}
			running := reserveOne(t, q, "seq-cancel", ms[2].ID, longLease)
			if _, err := c.Cancel(t.Context(), running.ID); err != nil {
				t.Fatalf("Cancel(running head): %v", err)
			}
			reserveOne(t, q, "seq-cancel", ms[3].ID, longLease)
		}

		fs := seqMembers(t, q, "seq-forget", "k", 2)
		finishSeq(t, q, reserveOne(t, q, "seq-forget", fs[0].ID, longLease), driver.OutcomeFailed)
		expectNone(t, q, "seq-forget")
		if err := q.ForgetDead(t.Context(), fs[0].ID); err != nil {
			t.Fatalf("ForgetDead(head): %v", err)
		}
		reserveOne(t, q, "seq-forget", fs[1].ID, longLease)

		gs := seqMembers(t, q, "seq-flush", "k", 2)
		finishSeq(t, q, reserveOne(t, q, "seq-flush", gs[0].ID, longLease), driver.OutcomeFailed)
		if n, err := q.FlushDead(t.Context(), "seq-flush"); err != nil || n != 1 {
			t.Fatalf("FlushDead = %d, %v; want 1", n, err)
		}
		reserveOne(t, q, "seq-flush", gs[1].ID, longLease)

		// Purge deletes the waiting members and a waiting head; a running
		// head stays and holds the members pushed after the purge.
		run := seqMembers(t, q, "seq-purge", "r", 3)
		head := reserveOne(t, q, "seq-purge", run[0].ID, longLease)
		seqMembers(t, q, "seq-purge", "w", 2)
		if n, err := q.Purge(t.Context(), "seq-purge"); err != nil || n != 4 {
			t.Fatalf("Purge = %d, %v; want 4 (two waiting of r, both of w)", n, err)
		}
		wantLen(t, q, "seq-purge", 1)
		later := seqMember("seq-purge", "r", false)
		push(t, q, later)
		anew := seqMember("seq-purge", "w", false)
		push(t, q, anew)
		reserveOne(t, q, "seq-purge", anew.ID, longLease)
		finishSeq(t, q, head, driver.OutcomeDone)
		reserveOne(t, q, "seq-purge", later.ID, longLease)
	})
}

// reserveAllExcept fails if anything but the job except (which it acks)
// is reservable on queueName.
func reserveAllExcept(t *testing.T, q queue.Queue, queueName, except string) {
	t.Helper()
	for _, j := range reserve(t, q, []string{queueName}, 10, longLease) {
		if j.ID != except {
			t.Fatalf("Reserve gave %s while the sequence is held", j.ID)
		}
		ack(t, q, j)
	}
}

// sameIDs reports whether got and want hold the same IDs in any order.
func sameIDs(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := make(map[string]int, len(want))
	for _, id := range want {
		seen[id]++
	}
	for _, id := range got {
		if seen[id] == 0 {
			return false
		}
		seen[id]--
	}
	return true
}
