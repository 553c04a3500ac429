package queue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue/driver"
)

// stubStarter is a stubQueue that is a Starter.
type stubStarter struct {
	*stubQueue
	mu        sync.Mutex
	unstarted []int       // n of each ReserveUnstarted call
	counted   []int       // n of each Reserve call
	starting  []int       // n of each ReserveStarting call
	recovered int         // the first this many jobs of a ReserveStarting call are Recovered
	starts    [][]driver. // each Start call's leases
			Lease
	start      func([]driver.Lease) ([]driver.Lease, error)
	startGate  chan struct{} // when set, Start waits for it
	startBegan chan struct{} // when set, Start signals on it first
}

func (s *stubStarter) Reserve(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	s.mu.Lock()
	s.counted = append(s.counted, n)
	s.mu.Unlock()
	return jobsN("c", n, 1), nil
}

// ReserveStarting returns n jobs, the first s.recovered of them taken
// back from an expired lease (uncounted), the others counted.
func (s *stubStarter) ReserveStarting(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	s.mu.Lock()
	s.starting = append(s.starting, n)
	rec := s.recovered
	s.mu.Unlock()
	out := jobsN("s", n, 1)
	for i := range out[:min(rec, n)] {
		out[i].Attempts, out[i].Recovered = 0, true
	}
	return out, nil
}

func (s *stubStarter) ReserveUnstarted(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	s.mu.Lock()
	s.unstarted = append(s.unstarted, n)
	s.mu.Unlock()
	return jobsN("u", n, 0), nil
}

func (s *stubStarter) Start(_ context.Context, leases []driver.Lease) ([]driver.Lease, error) {
	if s.startBegan != nil {
		s.startBegan <- struct{}{}
	}
	if s.startGate != nil {
		<-s.startGate
	}
	s.mu.Lock()
	s.starts = append(s.starts, leases)
	s.mu.Unlock()
	if s.start != nil {
		return s.start(leases)
	}
	return nil, nil
}

func jobsN(prefix string, n, attempts int) []Job {
	out := make([]Job, n)
	for i := range out {
		out[i] = Job{ID: prefix + string(rune('a'+i)), Name: "greet", Queue: DefaultQueue, Attempts: attempts, LeaseToken: "t"}
	}
	return out
}

// TestFetcherCountsTheIdleHandlersJobsAtReservation checks how the
// fetcher reserves: the jobs for its idle handlers through ReserveStarting
// (counted by the claim, no start mark to write), the rest (the prefetch)
// through ReserveUnstarted, counted only when each handler starts; a job
// taken back from an expired lease still needs its start mark.
func TestFetcherCountsTheIdleHandlersJobsAtReservation(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n, idle       int
		recovered     int
		wantStarting  []int
		wantUnstarted []int
	}{
		{name: "all idle", n: 4, idle: 4, wantStarting: []int{4}},
		{name: "some idle", n: 10, idle: 4, wantStarting: []int{4}, wantUnstarted: []int{6}},
		{name: "some idle, two recovered", n: 10, idle: 4, recovered: 2, wantStarting: []int{4}, wantUnstarted: []int{6}},
		{name: "none idle", n: 10, idle: 0, wantUnstarted: []int{10}},
		{name: "more busy than held", n: 10, idle: -3, wantUnstarted: []int{10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stubStarter{stubQueue: &stubQueue{t: t}, recovered: tc.recovered}
			f := &fetcher{q: st, queues: []string{DefaultQueue}, ctx: context.Background()}
			jobs, unstarted, err := f.reserve(tc.n, tc.idle)
			if err != nil || len(jobs) != tc.n {
				t.Fatalf("reserve = %d jobs, %v; want %d", len(jobs), err, tc.n)
			}
			if len(st.counted) != 0 || !equalInts(st.starting, tc.wantStarting) || !equalInts(st.unstarted, tc.wantUnstarted) {
				t.Fatalf("Reserve calls %v, ReserveStarting calls %v, ReserveUnstarted calls %v; want none, %v and %v",
					st.counted, st.starting, st.unstarted, tc.wantStarting, tc.wantUnstarted)
			}
			for i, j := range jobs {
				counted := i < max(tc.idle, 0) && i >= tc.recovered
				if unstarted[i] == counted || j.Attempts != map[bool]int{true: 1, false: 0}[counted] {
					t.Fatalf("job %d (%s): unstarted %v with %d attempts; want unstarted %v", i, j.ID, unstarted[i], j.Attempts, !counted)
				}
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// newStartExecutor is an executor over st whose handler records the
// attempts it saw.
func newStartExecutor(st *stubStarter, seen *[]int, mu *sync.Mutex) *executor {
	c := newCompleter(st) // not started: outcomes are recorded at once
	return &executor{
		handlers: map[string]Handler{"greet": func(_ context.Context, j Job) error {
			mu.Lock()
			*seen = append(*seen, j.Attempts)
			mu.Unlock()
			return nil
		}},
		maxAttempts: func(*Job) int { return 3 }, backoff: Fixed(time.Minute), base: context.Background(),
		leases: c.leases, completer: c, abandoned: newAbandoned(1), observe: noObserve, log: slog.New(slog.DiscardHandler),
		starts: &starts{q: st, ctx: context.Background()},
	}
}

func TestExecutorStartsAPrefetchedJobBeforeItsHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		attempts int // stored
		start    func([]driver.Lease) ([]driver.Lease, error)
		ran      bool
		nacked   string
		failed   string
	}{
		{name: "started", attempts: 1, ran: true},
		{name: "lease lost", attempts: 1, start: func(ls []driver.Lease) ([]driver.Lease, error) { return ls, nil }},
		{name: "start fails", attempts: 1, start: func([]driver.Lease) ([]driver.Lease, error) { return nil, errors.New("connection reset") }, nacked: "recording the start"},
		{name: "no attempt left", attempts: 3, failed: "started 3 times and allows 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stubStarter{stubQueue: &stubQueue{t: t}, start: tc.start}
			var seen []int
			var mu sync.Mutex
			e := newStartExecutor(st, &seen, &mu)
			j := &Job{ID: "p", Name: "greet", Queue: DefaultQueue, Attempts: tc.attempts, LeaseToken: "t"}
			h := e.leases.addAll([]*Job{j}, time.Minute)
			h[0].unstarted = true
			e.execute(j, &h[0])
			e.completer.close()
			if tc.ran != (len(seen) == 1) {
				t.Fatalf("handler ran %d times, want ran=%v", len(seen), tc.ran)
			}
			if tc.ran && seen[0] != tc.attempts+1 {
				t.Errorf("handler saw attempt %d, want %d", seen[0], tc.attempts+1)
			}
			if tc.failed == "" && len(st.starts) != 1 {
				t.Errorf("%d Start calls, want 1 before the handler", len(st.starts))
			}
			if tc.failed != "" && (len(st.starts) != 0 || len(st.failed) != 1 || !strings.Contains(st.failed[0], tc.failed)) {
				t.Errorf("Start calls %d, failed %q; want no start and a failure with %q", len(st.starts), st.failed, tc.failed)
			}
			if tc.nacked != "" && (len(st.nacked) != 1 || !strings.Contains(st.nacked[0], tc.nacked)) {
				t.Errorf("nacked %q, want one release with %q", st.nacked, tc.nacked)
			}
			if tc.nacked == "" && len(st.nacked) != 0 {
				t.Errorf("nacked %q, want none", st.nacked)
			}
		})
	}
}

func TestStartsBatchesTheStartsThatWaitForACall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &stubStarter{stubQueue: &stubQueue{t: t}, startGate: make(chan struct{}), startBegan: make(chan struct{})}
		b := &starts{q: st, ctx: context.Background()}
		var wg sync.WaitGroup
		first := make(chan bool, 1)
		wg.Go(func() {
			lost, err := b.start(driver.Lease{JobID: "a", Token: "t"})
			first <- !lost && err == nil
		})
		<-st.startBegan // the first call is under way
		for _, id := range []string{"b", "c", "d"} {
			wg.Go(func() {
				if lost, err := b.start(driver.Lease{JobID: id, Token: "t"}); lost || err != nil {
					t.Errorf("start(%s) = %v, %v", id, lost, err)
				}
			})
		}
		synctest.Wait() // b, c and d wait for the call in flight
		go func() {
			<-st.startBegan
			st.startGate <- struct{}{}
		}()
		st.startGate <- struct{}{}
		wg.Wait()
		if !<-first {
			t.Fatal("the first start failed")
		}
		if len(st.starts) != 2 || len(st.starts[0]) != 1 || len(st.starts[1]) != 3 {
			t.Fatalf("Start calls %v, want one of a, then one of b, c and d together", st.starts)
		}
	})
}

// stubStartAcker is a stubStarter that is a StartAcker.
type stubStartAcker struct {
	*stubStarter
	startAcks [][2][]driver. // each StartAck call's starts and acks
			Lease
	startAck func(starts, acks []driver.Lease) ([]driver.Lease, []driver.Lease, error)
}

func (s *stubStartAcker) AckMany(_ context.Context, leases []driver.Lease) ([]driver.Lease, error) {
	return s.ackMany(leases)
}

func (s *stubStartAcker) StartAck(_ context.Context, starts, acks []driver.Lease) ([]driver.Lease, []driver.Lease, error) {
	s.mu.Lock()
	s.startAcks = append(s.startAcks, [2][]driver.Lease{starts, acks})
	s.mu.Unlock()
	if s.startAck != nil {
		return s.startAck(starts, acks)
	}
	return nil, nil, nil
}

func TestCompleterWritesStartMarksInItsAckFlush(t *testing.T) {
	t.Parallel()
	mark := func(id string) ackItem {
		return ackItem{j: &Job{ID: id, LeaseToken: "t"}, mark: &startReq{l: driver.Lease{JobID: id, Token: "t"}, done: make(chan struct{}, 1)}}
	}
	lease := func(id string) driver.Lease { return driver.Lease{JobID: id, Token: "t"} }
	boom := errors.New("connection reset")
	for _, tc := range []struct {
		name      string
		acks      []string
		startAck  func(starts, acks []driver.Lease) ([]driver.Lease, []driver.Lease, error)
		startAcks int // StartAck calls
		starts    int // Start calls
		ackManys  int // AckMany calls
		markErr   error
		lostMark  string
	}{
		{name: "one call", acks: []string{"a1", "a2"}, startAcks: 1},
		{name: "lost start", acks: []string{"a1"}, startAcks: 1, lostMark: "m2",
			startAck: func([]driver.Lease, []driver.Lease) ([]driver.Lease, []driver.Lease, error) {
				return []driver.Lease{lease("m2")}, nil, nil
			}},
		// A failed call's marks are not retried (they might have counted):
		// they fail, and the acks are retried alone.
		{name: "call fails", acks: []string{"a1"}, startAcks: 1, ackManys: 1, markErr: boom,
			startAck: func([]driver.Lease, []driver.Lease) ([]driver.Lease, []driver.Lease, error) { return nil, nil, boom }},
		{name: "no acks", starts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sq := &stubQueue{t: t}
			sq.ackMany = func(ls []driver.Lease) ([]driver.Lease, error) { sq.acked = append(sq.acked, ls...); return nil, nil }
			sa := &stubStartAcker{stubStarter: &stubStarter{stubQueue: sq}, startAck: tc.startAck}
			c := newCompleter(sa)
			batch := []ackItem{mark("m1")}
			for _, id := range tc.acks {
				j := &Job{ID: id, LeaseToken: "t"}
				c.leases.add(j, time.Minute)
				batch = append(batch, ackItem{j: j})
			}
			batch = append(batch, mark("m2"))
			var b ackBatch
			for _, it := range batch {
				b.add(it)
			}
			c.flush(&b)
			if len(sa.startAcks) != tc.startAcks || len(sa.starts) != tc.starts || len(sa.acked) != tc.ackManys*len(tc.acks) {
				t.Fatalf("StartAck calls %v, Start calls %v, acked one by one or in AckMany %v; want %d, %d and %d calls",
					sa.startAcks, sa.starts, sa.acked, tc.startAcks, tc.starts, tc.ackManys)
			}
			if tc.startAcks == 1 && (len(sa.startAcks[0][0]) != 2 || len(sa.startAcks[0][1]) != len(tc.acks)) {
				t.Fatalf("StartAck got %v; want the 2 marks and the %d acks", sa.startAcks[0], len(tc.acks))
			}
			for _, it := range []ackItem{batch[0], batch[len(batch)-1]} {
				select {
				case <-it.mark.done:
				default:
					t.Fatalf("mark %s not answered", it.j.ID)
				}
				if !errors.Is(it.mark.err, tc.markErr) && it.mark.err != tc.markErr {
					t.Errorf("mark %s: err %v, want %v", it.j.ID, it.mark.err, tc.markErr)
				}
				if it.mark.lost != (it.j.ID == tc.lostMark) {
					t.Errorf("mark %s: lost %v", it.j.ID, it.mark.lost)
				}
			}
			if c.leases.len() != 0 {
				t.Errorf("%d leases still held after the flush", c.leases.len())
			}
		})
	}
}

// TestExecutorWaitsForItsMarkInTheAckFlush runs prefetched jobs through a
// completer whose flushes carry the marks: each handler runs once its
// attempt is counted, and the acks and marks share StartAck calls.
func TestExecutorWaitsForItsMarkInTheAckFlush(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		sq.ackMany = func(ls []driver.Lease) ([]driver.Lease, error) {
			sq.mu.Lock()
			sq.acked = append(sq.acked, ls...)
			sq.mu.Unlock()
			return nil, nil
		}
		sa := &stubStartAcker{stubStarter: &stubStarter{stubQueue: sq}}
		var seen []int
		var mu sync.Mutex
		e := newStartExecutor(sa.stubStarter, &seen, &mu)
		e.completer = newCompleter(sa)
		e.completer.leases = e.leases
		e.completer.start(8)
		var wg sync.WaitGroup
		for _, id := range []string{"p", "q", "r"} {
			j := &Job{ID: id, Name: "greet", Queue: DefaultQueue, LeaseToken: "t"}
			h := e.leases.addAll([]*Job{j}, time.Minute)
			h[0].unstarted = true
			wg.Go(func() { e.execute(j, &h[0]) })
		}
		wg.Wait()
		e.completer.close()
		if len(seen) != 3 || seen[0] != 1 || seen[1] != 1 || seen[2] != 1 {
			t.Fatalf("handlers saw attempts %v, want three runs of attempt 1", seen)
		}
		marks, acks := 0, 0
		for _, c := range sa.startAcks {
			marks += len(c[0])
			acks += len(c[1])
		}
		for _, ls := range sa.starts {
			marks += len(ls)
		}
		acks += len(sa.acked)
		if marks != 3 || acks != 3 {
			t.Fatalf("%d marks and %d acks written (StartAck %v, Start %v, acked %v); want 3 of each", marks, acks, sa.startAcks, sa.starts, sa.acked)
		}
	})
}

// TestCompleterLingersOnlyForAcks checks that acks at low load share a
// flush (they wait up to ackLinger for each other) while a start mark,
// whose handler waits for it, is sent at once with the acks queued before
// it.
func TestCompleterLingersOnlyForAcks(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		var calls [][]driver.Lease
		sq.ackMany = func(ls []driver.Lease) ([]driver.Lease, error) {
			sq.mu.Lock()
			calls = append(calls, ls)
			sq.mu.Unlock()
			return nil, nil
		}
		sa := &stubStartAcker{stubStarter: &stubStarter{stubQueue: sq}}
		c := newCompleter(sa)
		c.start(16)
		ack := func(id string) {
			j := &Job{ID: id, LeaseToken: "t"}
			c.leases.add(j, time.Minute)
			c.ack(j, time.Now(), 0, nil)
		}
		// Three acks a millisecond apart: one flush.
		for _, id := range []string{"a", "b", "c"} {
			ack(id)
			time.Sleep(time.Millisecond)
		}
		testutil.Eventually(t, ackLinger, func() bool {
			sq.mu.Lock()
			defer sq.mu.Unlock()
			return len(calls) > 0
		}, "no AckMany within ackLinger of the acks")
		synctest.Wait()
		if len(calls) != 1 || len(calls[0]) != 3 {
			t.Fatalf("AckMany calls %v, want one of a, b and c", calls)
		}
		// An ack then a mark: both go at once, in one StartAck.
		ack("d")
		start := time.Now()
		if lost, err, queued := c.markStart(&Job{ID: "m", LeaseToken: "t"}); lost || err != nil || !queued {
			t.Fatalf("markStart = %v, %v, %v", lost, err, queued)
		}
		if waited := time.Since(start); waited >= ackLinger {
			t.Errorf("the start mark waited %v, want no linger", waited)
		}
		c.close()
		if len(sa.startAcks) != 1 || len(sa.startAcks[0][0]) != 1 || len(sa.startAcks[0][1]) != 1 {
			t.Fatalf("StartAck calls %v, want one with the mark and the ack", sa.startAcks)
		}
	})
}
