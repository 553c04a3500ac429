package contracttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// chainStep is the job of the chain checks: step N of chain C.
type chainStep struct {
	C string
	N int
}

// chainCaught is the catch job of the chain checks.
type chainCaught struct{ C string }

// chainLog records the steps handled, per chain, in the order they ran.
type chainLog struct {
	mu       sync.Mutex
	steps    map[string][]int
	attempts map[string][]int
	caught   map[string][]queue.Job
}

func newChainLog() *chainLog {
	return &chainLog{steps: map[string][]int{}, attempts: map[string][]int{}, caught: map[string][]queue.Job{}}
}

// worker returns a Worker on q for queues that handles chainStep (failing
// the steps fail names with a permanent error) and chainCaught.
func (l *chainLog) worker(q queue.Queue, fail map[int]bool, queues ...string) *queue.Worker {
	w := queue.NewWorker(q).Slog(quiet).Queues(queues...).Poll(20 * time.Millisecond).Concurrency(4)
	queue.Handle(w, func(ctx context.Context, s chainStep) error {
		j, _ := queue.JobFromContext(ctx)
		l.mu.Lock()
		l.steps[s.C] = append(l.steps[s.C], s.N)
		l.attempts[s.C] = append(l.attempts[s.C], j.Attempts)
		l.mu.Unlock()
		if fail[s.N] {
			return queue.Permanent(fmt.Errorf("step %d of %s fails", s.N, s.C))
		}
		return nil
	})
	queue.Handle(w, func(ctx context.Context, c chainCaught) error {
		j, _ := queue.JobFromContext(ctx)
		l.mu.Lock()
		l.caught[c.C] = append(l.caught[c.C], j)
		l.mu.Unlock()
		return nil
	})
	return w
}

func (l *chainLog) ran(c string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.steps[c])
}

func (l *chainLog) catches(c string) []queue.Job {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.caught[c])
}

// newChain builds a chain of n chainSteps named c on queueName.
func newChain(t *testing.T, c, queueName string, n int) queue.Chain {
	t.Helper()
	var ch queue.Chain
	for i := 1; i <= n; i++ {
		j, err := queue.NewJob(chainStep{C: c, N: i}, queue.OnQueue(queueName))
		if err != nil {
			t.Fatal(err)
		}
		ch.Steps = append(ch.Steps, j)
	}
	return ch
}

// testChains checks chains (queue.Chain): steps in order and once, the
// catch job on a dead-lettered step, atomic dispatch inside a transaction,
// Complete's pushes, and a crash between two steps.
func (s *suite) testChains(t *testing.T) {
	s.check(t, "InOrderOnce", func(t *testing.T, q queue.Queue) {
		log := newChainLog()
		const chains, steps = 5, 3
		for c := range chains {
			if _, err := queue.DispatchChain(t.Context(), q, newChain(t, fmt.Sprint(c), "chain", steps)); err != nil {
				t.Fatalf("DispatchChain: %v", err)
			}
		}
		// Only the first step of each chain is stored before any runs.
		wantLen(t, q, "chain", chains)
		stop := runWorker(t, log.worker(q, nil, "chain"))
		eventually(t, "every step of every chain to run", func() bool {
			for c := range chains {
				if len(log.ran(fmt.Sprint(c))) < steps {
					return false
				}
			}
			return true
		})
		stop()
		for c := range chains {
			if got := log.ran(fmt.Sprint(c)); !slices.Equal(got, []int{1, 2, 3}) {
				t.Errorf("chain %d ran steps %v, want [1 2 3] once each", c, got)
			}
		}
		wantLen(t, q, "chain", 0)
	})
	s.check(t, "CatchOnDeadStep", func(t *testing.T, q queue.Queue) {
		log := newChainLog()
		ch := newChain(t, "c", "chain", 3)
		catch, err := queue.NewJob(chainCaught{C: "c"}, queue.OnQueue("chain"))
		if err != nil {
			t.Fatal(err)
		}
		ch.Catch = &catch
		if _, err := queue.DispatchChain(t.Context(), q, ch); err != nil {
			t.Fatalf("DispatchChain: %v", err)
		}
		stop := runWorker(t, log.worker(q, map[int]bool{2: true}, "chain"))
		eventually(t, "the catch job to run", func() bool { return len(log.catches("c")) > 0 })
		stop()
		if got := log.ran("c"); !slices.Equal(got, []int{1, 2}) {
			t.Errorf("the chain ran steps %v, want [1 2]: step 3 must not run after step 2 was dead-lettered", got)
		}
		caught := log.catches("c")
		if len(caught) != 1 {
			t.Fatalf("the catch job ran %d times, want once", len(caught))
		}
		if got := caught[0].Meta[queue.MetaChainFailed]; got != ch.Steps[1].ID {
			t.Errorf("catch job's %s = %q, want the failed step %s", queue.MetaChainFailed, got, ch.Steps[1].ID)
		}
		if got := caught[0].Meta[queue.MetaChainError]; !strings.Contains(got, "step 2 of c fails") {
			t.Errorf("catch job's %s = %q, want the step's error", queue.MetaChainError, got)
		}
		dead := deadLetters(t, q, "chain", 10)
		if len(dead) != 1 || dead[0].ID != ch.Steps[1].ID {
			t.Errorf("dead letters %v, want the failed step %s alone", ids(dead), ch.Steps[1].ID)
		}
		wantLen(t, q, "chain", 0)
	})
	s.check(t, "InvalidChain", func(t *testing.T, q queue.Queue) {
		ch := newChain(t, "c", "chain", 2)
		ch.Steps[1].UniqueKey = "k"
		if _, err := queue.DispatchChain(t.Context(), q, ch); !errors.Is(err, queue.ErrChain) {
			t.Errorf("a chain whose second step has a unique key: %v, want ErrChain", err)
		}
		if _, err := queue.DispatchChain(t.Context(), q, queue.Chain{}); !errors.Is(err, queue.ErrChain) {
			t.Errorf("a chain without steps: %v, want ErrChain", err)
		}
		wantLen(t, q, "chain", 0)
	})
	if s.h.Tx != nil {
		s.check(t, "AtomicInTx", func(t *testing.T, q queue.Queue) {
			p, _, rollback := s.h.Tx(t, q)
			if _, err := queue.DispatchChain(t.Context(), p, newChain(t, "rolled back", "chain", 3)); err != nil {
				t.Fatalf("DispatchChain in a transaction: %v", err)
			}
			if err := rollback(); err != nil {
				t.Fatal(err)
			}
			wantLen(t, q, "chain", 0)
			ch := newChain(t, "committed", "chain", 3)
			p, commit, _ := s.h.Tx(t, q)
			if _, err := queue.DispatchChain(t.Context(), p, ch); err != nil {
				t.Fatalf("DispatchChain in a transaction: %v", err)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			j := reserveOne(t, q, "chain", ch.Steps[0].ID, longLease)
			if j.Meta[queue.MetaChain] == "" {
				t.Errorf("the first step does not carry the rest of the chain in %s", queue.MetaChain)
			}
		})
	}
	s.check(t, "CompletePushes", func(t *testing.T, q queue.Queue) {
		ctx := t.Context()
		first := newJob("chainer")
		push(t, q, first)
		r := reserveOne(t, q, "chainer", first.ID, longLease)
		next := newJob("chainer")
		stale := r.Lease()
		stale.Token += "x"
		if err := completeOne(ctx, q, driver.Completion{Lease: stale, Outcome: driver.OutcomeDone, Push: []queue.Job{next}}); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("Complete(done) with a push under a lease that is not current: %v, want ErrLeaseLost", err)
		}
		wantLen(t, q, "chainer", 1) // nothing pushed
		held := newJob("chainer")
		held.UniqueKey = "held"
		push(t, q, held)
		dup := newJob("chainer")
		dup.UniqueKey = "held"
		if err := completeOne(ctx, q, driver.Completion{Lease: r.Lease(), Outcome: driver.OutcomeDone, Push: []queue.Job{next, dup}}); err != nil {
			t.Fatalf("Complete(done) with pushes: %v", err)
		}
		if err := ackLease(ctx, q, r.Lease()); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("Ack after Complete(done): %v, want ErrLeaseLost (acked already)", err)
		}
		got := reserve(t, q, []string{"chainer"}, 10, longLease)
		if want := sorted(held.ID, next.ID); !slices.Equal(sortedIDs(got), want) {
			t.Fatalf("after Complete(done) reserved %v, want %v (the pushed job and the holder of the key, not its duplicate)", sortedIDs(got), want)
		}
		var rn queue.Job
		for _, j := range got {
			if j.ID == next.ID {
				rn = j
			}
		}
		catch := newJob("chainer-catch")
		if err := completeOne(ctx, q, driver.Completion{Lease: rn.Lease(), Outcome: driver.OutcomeFailed, Reason: "boom", Push: []queue.Job{catch}}); err != nil {
			t.Fatalf("Complete(failed) with a push: %v", err)
		}
		dead := deadLetters(t, q, "chainer", 10)
		if len(dead) != 1 || dead[0].ID != next.ID || dead[0].LastError != "boom" {
			t.Fatalf("after Complete(failed) dead letters %v, want job %s with its reason", dead, next.ID)
		}
		reserveOne(t, q, "chainer-catch", catch.ID, longLease)
		if err := completeOne(ctx, q, driver.Completion{Lease: rn.Lease(), Outcome: driver.OutcomeFailed, Reason: "again", Push: []queue.Job{newJob("chainer-catch")}}); !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("Complete(failed) of a dead letter: %v, want ErrLeaseLost", err)
		}
		wantLen(t, q, "chainer-catch", 1) // the catch job reserved above, nothing more
	})
	s.check(t, "CrashBetweenSteps", func(t *testing.T, q queue.Queue) {
		// Step 1 runs on one process, which then stops. Another process
		// reserves step 2 and dies holding it (SIGKILL: no ack, no
		// release, no lease extension). A third finishes the chain once
		// the lease runs out: every step runs once and in order, step 2
		// on its second attempt.
		process := func() queue.Queue {
			if s.h.Peer != nil {
				return s.h.Peer(t, q)
			}
			return q // memory: several Workers in one process
		}
		log := newChainLog()
		ch := newChain(t, "c", "chain-2", 3)
		ch.Steps[0].Queue = "chain-1"
		if _, err := queue.DispatchChain(t.Context(), q, ch); err != nil {
			t.Fatalf("DispatchChain: %v", err)
		}
		stop := runWorker(t, log.worker(process(), nil, "chain-1"))
		eventually(t, "step 1 to run", func() bool { return len(log.ran("c")) == 1 })
		stop()
		killed := process()
		held := awaitReserve(t, killed, "chain-2", shortLease)
		if held.ID != ch.Steps[1].ID {
			t.Fatalf("the killed process reserved %s, want step 2 (%s)", held.ID, ch.Steps[1].ID)
		}
		stop = runWorker(t, log.worker(process(), nil, "chain-2"))
		eventually(t, "the chain to finish", func() bool { return len(log.ran("c")) == 3 })
		stop()
		if got := log.ran("c"); !slices.Equal(got, []int{1, 2, 3}) {
			t.Fatalf("the chain ran steps %v, want [1 2 3] once each", got)
		}
		log.mu.Lock()
		attempts := slices.Clone(log.attempts["c"])
		log.mu.Unlock()
		if !slices.Equal(attempts, []int{1, 2, 1}) {
			t.Errorf("the steps ran on attempts %v, want [1 2 1] (step 2 again after the killed process's lease)", attempts)
		}
		wantLen(t, q, "", 0)
	})
}
