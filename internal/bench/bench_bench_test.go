package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// benchTargets are the drivers the go test benchmarks measure: memory
// always, the SQL drivers whose servers are configured (see targets_test.go).
func benchTargets(b *testing.B) []Target {
	return append([]Target{Memory{}}, sqlTestTargets(b)...)
}

// eachTarget runs fn as the sub-benchmark of target t on a fresh queue of
// t's, dropped afterwards.
func eachTarget(b *testing.B, t Target, fn func(b *testing.B, ctx context.Context, q queue.Queue)) {
	b.Run(t.Name(), func(b *testing.B) {
		ctx := context.Background()
		q, drop, err := t.NewQueue(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer func() {
			if err := drop(ctx); err != nil {
				b.Error(err)
			}
		}()
		fn(b, ctx, q)
	})
}

// benchOptions keeps go test benchmarks small: b.N sizes the work.
var benchOptions = Options{Concurrency: 1000, Poll: 20 * time.Millisecond, Producers: 2, ChunkSize: 1000}.withDefaults()

// BenchmarkBurnDown queues b.N jobs, then measures how fast one worker
// handles and acks them.
func BenchmarkBurnDown(b *testing.B) {
	for _, t := range benchTargets(b) {
		eachTarget(b, t, func(b *testing.B, ctx context.Context, q queue.Queue) {
			e := QueueEngine(q)
			if err := fill(ctx, e, b.N, benchOptions); err != nil {
				b.Fatal(err)
			}
			var handled atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			stop, err := e.StartWorkers(benchOptions, func(int64) { handled.Add(1) })
			if err != nil {
				b.Fatal(err)
			}
			werr := waitCount(ctx, &handled, int64(b.N))
			if err := stop(); err != nil || werr != nil {
				b.Fatal(werr, err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkDispatchMany measures DispatchMany of b.N jobs in chunks of
// 1,000 from two goroutines.
func BenchmarkDispatchMany(b *testing.B) {
	for _, t := range benchTargets(b) {
		eachTarget(b, t, func(b *testing.B, ctx context.Context, q queue.Queue) {
			b.ReportAllocs()
			b.ResetTimer()
			if err := fill(ctx, QueueEngine(q), b.N, benchOptions); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkDispatch measures single Dispatch calls from parallel
// goroutines.
func BenchmarkDispatch(b *testing.B) {
	for _, t := range benchTargets(b) {
		eachTarget(b, t, func(b *testing.B, ctx context.Context, q queue.Queue) {
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := QueueEngine(q).Dispatch(ctx, 0); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
