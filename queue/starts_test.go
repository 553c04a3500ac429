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
)

// stubStarter is a stubQueue that is a Starter.
type stubStarter struct {
	*stubQueue
	mu         sync.Mutex
	unstarted  []int     // n of each ReserveUnstarted call
	counted    []int     // n of each Reserve call
	starts     [][]Lease // each Start call's leases
	start      func([]Lease) ([]Lease, error)
	startGate  chan struct{} // when set, Start waits for it
	startBegan chan struct{} // when set, Start signals on it first
}

func (s *stubStarter) Reserve(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	s.mu.Lock()
	s.counted = append(s.counted, n)
	s.mu.Unlock()
	return jobsN("c", n, 1), nil
}

func (s *stubStarter) ReserveUnstarted(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	s.mu.Lock()
	s.unstarted = append(s.unstarted, n)
	s.mu.Unlock()
	return jobsN("u", n, 0), nil
}

func (s *stubStarter) Start(_ context.Context, leases []Lease) ([]Lease, error) {
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

func TestFetcherCountsOnlyTheJobsIdleHandlersStart(t *testing.T) {
	for _, tc := range []struct {
		name              string
		n, idle           int
		counted, unstartd []int
	}{
		{"all idle", 4, 4, []int{4}, nil},
		{"some idle", 10, 4, []int{4}, []int{6}},
		{"none idle", 10, 0, nil, []int{10}},
		{"more busy than held", 10, -3, nil, []int{10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stubStarter{stubQueue: &stubQueue{t: t}}
			f := &fetcher{q: st, starter: st, queues: []string{DefaultQueue}, ctx: context.Background()}
			jobs, err := f.reserve(tc.n, tc.idle)
			if err != nil || len(jobs) != tc.n {
				t.Fatalf("reserve = %d jobs, %v; want %d", len(jobs), err, tc.n)
			}
			if !equalInts(st.counted, tc.counted) || !equalInts(st.unstarted, tc.unstartd) {
				t.Fatalf("Reserve calls %v, ReserveUnstarted calls %v; want %v and %v", st.counted, st.unstarted, tc.counted, tc.unstartd)
			}
			for _, j := range jobs {
				if j.unstarted != (j.Attempts == 0) {
					t.Fatalf("job %s: unstarted %v with %d attempts", j.ID, j.unstarted, j.Attempts)
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
	c := newCompleter(st)
	c.start(1)
	return &executor{
		handlers: map[string]Handler{"greet": func(_ context.Context, j Job) error {
			mu.Lock()
			*seen = append(*seen, j.Attempts)
			mu.Unlock()
			return nil
		}},
		maxAttempts: func(*Job) int { return 3 }, backoff: Fixed(time.Minute), base: context.Background(),
		leases: c.leases, completer: c, abandoned: newAbandoned(1), observe: noObserve, log: slog.New(slog.DiscardHandler),
		starts: &starts{s: st, ctx: context.Background()},
	}
}

func TestExecutorStartsAPrefetchedJobBeforeItsHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		attempts int // stored
		start    func([]Lease) ([]Lease, error)
		ran      bool
		nacked   string
		failed   string
	}{
		{name: "started", attempts: 1, ran: true},
		{name: "lease lost", attempts: 1, start: func(ls []Lease) ([]Lease, error) { return ls, nil }},
		{name: "start fails", attempts: 1, start: func([]Lease) ([]Lease, error) { return nil, errors.New("connection reset") }, nacked: "recording the start"},
		{name: "no attempt left", attempts: 3, failed: "started 4 times but allows 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stubStarter{stubQueue: &stubQueue{t: t}, start: tc.start}
			var seen []int
			var mu sync.Mutex
			e := newStartExecutor(st, &seen, &mu)
			j := &Job{ID: "p", Name: "greet", Queue: DefaultQueue, Attempts: tc.attempts, LeaseToken: "t", unstarted: true}
			e.leases.add(j, time.Minute)
			e.execute(j)
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
		b := &starts{s: st, ctx: context.Background()}
		var wg sync.WaitGroup
		first := make(chan bool, 1)
		wg.Go(func() {
			lost, err := b.start(Lease{JobID: "a", Token: "t"})
			first <- !lost && err == nil
		})
		<-st.startBegan // the first call is under way
		for _, id := range []string{"b", "c", "d"} {
			wg.Go(func() {
				if lost, err := b.start(Lease{JobID: id, Token: "t"}); lost || err != nil {
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
