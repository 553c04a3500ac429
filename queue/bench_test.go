package queue_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type noop struct{ N int }

// BenchmarkWorkerMemqueue measures end-to-end throughput: b.N jobs are
// queued first, then one worker handles them with a no-op handler and acks
// them (burn-down).
func BenchmarkWorkerMemqueue(b *testing.B) {
	for _, conc := range []int{1, 10, 100} {
		b.Run("concurrency="+strconv.Itoa(conc), func(b *testing.B) {
			ctx := context.Background()
			q := memqueue.New()
			vs := make([]noop, b.N)
			if _, err := queue.DispatchMany(ctx, q, vs); err != nil {
				b.Fatal(err)
			}
			var done atomic.Int64
			finished := make(chan struct{})
			n := int64(b.N)
			w := queue.NewWorker(q).Slog(quiet).Concurrency(conc)
			queue.Handle(w, func(context.Context, noop) error {
				if done.Add(1) == n {
					close(finished)
				}
				return nil
			})
			b.ResetTimer()
			runCtx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() { errc <- w.Run(runCtx) }()
			<-finished
			b.StopTimer()
			cancel()
			<-errc
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkWorkerDispatch measures the Worker's own cost per job, apart
// from any driver's: one worker at the bench's settings (Concurrency 1000,
// the default prefetch) works b.N jobs from a queue that hands out jobs
// made beforehand and records nothing (fastQueue), through the same paths
// as a real driver's (claims, prefetched jobs started in the ack flushes,
// batched acks). Its allocations per job are the Worker's, and so is its
// cpu-ns/op, the process's CPU time per job (getrusage), which moves much
// less than ns/op with the load of a shared machine.
func BenchmarkWorkerDispatch(b *testing.B) {
	for _, conc := range []int{10, 1000} {
		b.Run("concurrency="+strconv.Itoa(conc), func(b *testing.B) {
			q := newFastQueue(b.N)
			var done atomic.Int64
			finished := make(chan struct{})
			n := int64(b.N)
			w := queue.NewWorker(q).Slog(quiet).Concurrency(conc)
			queue.Handle(w, func(context.Context, noop) error {
				if done.Add(1) == n {
					close(finished)
				}
				return nil
			})
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, cpuOK := processCPU()
			runCtx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- w.Run(runCtx) }()
			<-finished
			b.StopTimer()
			cpu1, _ := processCPU()
			cancel()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			if cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// fastQueue is a queue.Queue for BenchmarkWorkerDispatch: it hands out
// jobs made in advance, in order, and accepts every lease back without
// looking.
type fastQueue struct {
	mu   sync.Mutex
	jobs []queue.Job // not yet reserved
}

func newFastQueue(n int) *fastQueue {
	jobs := make([]queue.Job, n)
	for i := range jobs {
		jobs[i] = queue.Job{ID: strconv.Itoa(i), Queue: queue.DefaultQueue, Name: queue.NameOf[noop](), Payload: []byte(`{}`)}
	}
	return &fastQueue{jobs: jobs}
}

func (q *fastQueue) take(max int, lease time.Duration, inc int) []queue.Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(max, len(q.jobs))
	out := make([]queue.Job, k) // a driver returns jobs of the caller's own
	copy(out, q.jobs[:k])
	q.jobs = q.jobs[k:]
	exp := time.Now().Add(lease)
	for i := range out {
		out[i].Attempts += inc
		out[i].LeaseToken, out[i].LeaseExpiresAt = "t", exp
	}
	return out
}

func (q *fastQueue) Reserve(_ context.Context, _ []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.take(max, lease, 1), nil
}

func (q *fastQueue) ReserveStarting(_ context.Context, _ []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.take(max, lease, 1), nil
}

func (q *fastQueue) ReserveUnstarted(_ context.Context, _ []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.take(max, lease, 0), nil
}

func (q *fastQueue) ExtendMany(context.Context, []driver.Lease, time.Duration) ([]driver.Lease, error) {
	return nil, nil
}
func (q *fastQueue) PushMany(_ context.Context, jobs []queue.Job) ([]bool, error) {
	return make([]bool, len(jobs)), nil
}
func (q *fastQueue) Complete(_ context.Context, _ []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	return nil, make([]error, len(outs)), nil
}
func (q *fastQueue) Push(context.Context, queue.Job) error                       { return nil }
func (q *fastQueue) Ack(context.Context, driver.Lease) error                     { return nil }
func (q *fastQueue) Nack(context.Context, driver.Lease, time.Time, string) error { return nil }
func (q *fastQueue) Fail(context.Context, driver.Lease, string) error            { return nil }
func (q *fastQueue) Extend(context.Context, driver.Lease, time.Duration) error   { return nil }
func (q *fastQueue) DeadLetters(context.Context, string, int) ([]queue.Job, error) {
	return nil, nil
}
func (q *fastQueue) RetryDead(context.Context, string) error        { return nil }
func (q *fastQueue) ForgetDead(context.Context, string) error       { return nil }
func (q *fastQueue) FlushDead(context.Context, string) (int, error) { return 0, nil }
func (q *fastQueue) Len(context.Context, string) (int, error)       { return 0, nil }
func (q *fastQueue) Purge(context.Context, string) (int, error)     { return 0, nil }

var _ queue.Queue = (*fastQueue)(nil)
