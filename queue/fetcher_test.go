package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// TestFetcherPrefetchesWhateverHandlersRun checks that the fetcher
// reserves ahead of its idle handlers (about 50ms of work at its measured
// rate) however many of them run a job: when they idle because the
// reservations are slower than the jobs, reserving for the idle handlers
// alone would cap the run at Concurrency jobs per round trip.
func TestFetcherPrefetchesWhateverHandlersRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		running       int // of 4 handlers
		wantUnstarted []int
	}{
		{running: 0, wantUnstarted: []int{100}},
		{running: 1, wantUnstarted: []int{100}},
		{running: 2, wantUnstarted: []int{100}},
		{running: 3, wantUnstarted: []int{100}},
	} {
		t.Run(fmt.Sprint(tc.running, " running"), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				sq := &startingStub{stubQueue: &stubQueue{t: t}}
				leases := newHeldLeases()
				for i := range tc.running {
					j := job(fmt.Sprint("r", i))
					leases.add(j, time.Minute)
					leases.run(j, nil, context.Background())
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				// A measured rate of 10,000 jobs/s: 100 jobs ahead at most.
				f := &fetcher{q: sq, queues: []string{DefaultQueue}, lease: time.Minute, concurrency: 4, poll: time.Second,
					log: slog.New(slog.DiscardHandler), ctx: context.Background(), leases: leases, halt: &halt{stop: cancel},
					out: make(chan *held, 200), freed: newFreed(), pace: pacer{horizon: prefetchHorizon, max: 100, rate: 10000}}
				done := make(chan struct{})
				go func() { f.run(ctx); close(done) }()
				synctest.Wait() // the fetcher waits for a handler to finish
				cancel()
				<-done
				sq.mu.Lock()
				defer sq.mu.Unlock()
				// The 4 handlers are the fetcher's own (the jobs running
				// here are not its): 4 for them, counted, then 100 ahead.
				if len(sq.counted) != 0 || fmt.Sprint(sq.starting) != "[4]" || fmt.Sprint(sq.unstarted) != fmt.Sprint(tc.wantUnstarted) {
					t.Errorf("with %d of 4 handlers running: Reserve %v, ReserveStarting %v, ReserveUnstarted %v; want none, [4] and %v",
						tc.running, sq.counted, sq.starting, sq.unstarted, tc.wantUnstarted)
				}
			})
		})
	}
}
