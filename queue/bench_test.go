package queue_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
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
