package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/queue/balance"
	"github.com/meridianjobs/meridian/queue/driver"
)

// startingStub is a stubQueue that is a Starter and records the sizes of
// the reservations asked of it.
type startingStub struct {
	*stubQueue
	mu        sync.Mutex
	counted   []int // Reserve's max, per call
	unstarted []int // ReserveUnstarted's max, per call
	starting  []int // ReserveStarting's max, per call
}

func (s *startingStub) jobs(prefix string, n int) []Job {
	out := make([]Job, n)
	for i := range out {
		out[i] = *job(fmt.Sprint(prefix, i))
	}
	return out
}

func (s *startingStub) Reserve(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counted = append(s.counted, n)
	return s.jobs(fmt.Sprint("c", len(s.counted), "-"), n), nil
}

func (s *startingStub) ReserveStarting(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = append(s.starting, n)
	return s.jobs(fmt.Sprint("s", len(s.starting), "-"), n), nil
}

func (s *startingStub) ReserveUnstarted(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unstarted = append(s.unstarted, n)
	return s.jobs(fmt.Sprint("u", len(s.unstarted), "-"), n), nil
}

func (s *startingStub) Start(context.Context, []driver.Lease) ([]driver.Lease, error) {
	return nil, nil
}

// turnOnce runs f in a synctest bubble until it waits for a handler to
// finish (its first reservations made), then stops it. It sets f's
// plumbing: a minute's lease, a second's poll, a discarding log, a halt
// that stops it, a handoff, and held leases unless f has some.
func turnOnce(t *testing.T, f *fetcher) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.lease, f.poll, f.log, f.ctx = time.Minute, time.Second, slog.New(slog.DiscardHandler), context.Background()
	f.halt, f.out, f.freed = &halt{stop: cancel}, &handoff{}, newFreed()
	if f.leases == nil {
		f.leases = newHeldLeases()
	}
	done := make(chan struct{})
	go func() { f.run(ctx); close(done) }()
	synctest.Wait() // the fetcher waits for a handler to finish
	cancel()
	<-done
}

// TestFetcherPrefetchesForBusyHandlers checks that the fetcher reserves
// ahead of its idle handlers (about 50ms of work at its measured rate,
// here 100 jobs) while its handlers are busy, and however many of them
// run a job now: when they idle because the reservations are slower than
// the jobs, reserving for the idle handlers alone would cap the run at
// Concurrency jobs per round trip. Where at least half a prefetch's worth
// of handlers idles anyway (the jobs finish faster than claims bring
// them), a prefetched job would only wait for its start mark, a round
// trip like a claim's, and cost a write: the fetcher then reserves for its
// idle handlers alone, whose attempts their claim counts.
func TestFetcherPrefetchesForBusyHandlers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		handlers      int
		running       int     // jobs running now, not the fetcher's
		busy          float64 // of the handlers, on average, running jobs
		wantUnstarted []int
	}{
		{handlers: 4, running: 0, wantUnstarted: []int{100}},
		{handlers: 4, running: 1, wantUnstarted: []int{100}},
		{handlers: 4, running: 3, wantUnstarted: []int{100}},
		{handlers: 200, busy: 0, wantUnstarted: nil},
		{handlers: 200, busy: 100, wantUnstarted: nil},
		{handlers: 200, busy: 150, wantUnstarted: nil}, // 50 spare: half the 100 ahead
		{handlers: 200, busy: 151, wantUnstarted: []int{100}},
		{handlers: 200, busy: 200, wantUnstarted: []int{100}},
	} {
		t.Run(fmt.Sprint(tc.handlers, " handlers, ", tc.running, " running, ", tc.busy, " busy"), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				sq := &startingStub{stubQueue: &stubQueue{t: t}}
				leases := newHeldLeases()
				for i := range tc.running {
					j := job(fmt.Sprint("r", i))
					leases.add(j, time.Minute)
					leases.run(j, nil, context.Background(), time.Now())
				}
				// A measured rate of 10,000 jobs/s: 100 jobs ahead at most.
				turnOnce(t, &fetcher{q: sq, queues: []string{DefaultQueue}, concurrency: tc.handlers, leases: leases,
					pace: pacer{horizon: prefetchHorizon, max: 100, rate: 10000, busy: tc.busy}})
				sq.mu.Lock()
				defer sq.mu.Unlock()
				// The handlers are the fetcher's own (the jobs running
				// here are not its): a claim for all of them, counted,
				// then 100 ahead or none.
				if len(sq.counted) != 0 || fmt.Sprint(sq.starting) != fmt.Sprint([]int{tc.handlers}) || fmt.Sprint(sq.unstarted) != fmt.Sprint(tc.wantUnstarted) {
					t.Errorf("Reserve %v, ReserveStarting %v, ReserveUnstarted %v; want none, [%d] and %v",
						sq.counted, sq.starting, sq.unstarted, tc.handlers, tc.wantUnstarted)
				}
			})
		})
	}
}

// TestFetcherWeightedReservesStartingForIdleHandlers checks that under
// weights a queue's share that the idle handlers can all take is reserved
// with its attempts counted in the claim, as in strict order, and only the
// part ahead of them without.
func TestFetcherWeightedReservesStartingForIdleHandlers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                    string
		rate                    float64 // the pace's, jobs/s
		busy                    float64
		wantStarting, wantUnstd string
	}{
		// 12 idle handlers, shares 9:3; none ahead (the handlers idle,
		// 12 spare against 10 ahead at 200 jobs/s).
		{name: "handlers idle", rate: 200, busy: 0, wantStarting: "[3 9]", wantUnstd: "[]"},
		// Busy handlers: 100 ahead as well, 112 split 84:28, each share
		// more than the 12 idle handlers take.
		{name: "handlers busy", rate: 10000, busy: 12, wantStarting: "[]", wantUnstd: "[28 84]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				sq := &startingStub{stubQueue: &stubQueue{t: t}}
				turnOnce(t, &fetcher{q: sq, queues: []string{"a", "b"}, concurrency: 12, pick: balance.NewPicker([]int{3, 1}),
					pace: pacer{horizon: prefetchHorizon, max: 100, rate: tc.rate, busy: tc.busy}})
				sq.mu.Lock()
				defer sq.mu.Unlock()
				if got := fmt.Sprint(sq.starting); got != tc.wantStarting || fmt.Sprint(sq.unstarted) != tc.wantUnstd {
					t.Errorf("ReserveStarting %v, ReserveUnstarted %v; want %v and %v", sq.starting, sq.unstarted, tc.wantStarting, tc.wantUnstd)
				}
			})
		})
	}
}
