package sqlqueue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// eachDialectB runs fn as a sub-benchmark per dialect whose server is
// available, on a fresh table.
func eachDialectB(b *testing.B, fn func(b *testing.B, q queue.Queue)) {
	for _, d := range []string{"sqlite", "postgres", "mysql"} {
		b.Run(d, func(b *testing.B) {
			var be backend
			switch d {
			case "sqlite":
				be = sqliteBackend()
			case "postgres":
				be = serverBackend(b, "postgres", "pgx", "MERIDIAN_POSTGRES_DSN")
			case "mysql":
				be = serverBackend(b, "mysql", "mysql", "MERIDIAN_MYSQL_DSN")
			}
			fn(b, newStore(b, be).queue(b))
		})
	}
}

// BenchmarkPushMany measures DispatchMany's path: batches of 1,000 jobs,
// one multi-row INSERT each.
func BenchmarkPushMany(b *testing.B) {
	eachDialectB(b, func(b *testing.B, q queue.Queue) {
		bp := q.(queue.BatchPusher)
		batch := make([]queue.Job, 1000)
		for b.Loop() {
			for i := range batch {
				batch[i] = queue.Job{ID: queue.NewID(), Name: "bench", Payload: []byte(`{"n":1}`)}
			}
			if _, err := bp.PushMany(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "jobs/s")
	})
}

// BenchmarkReserveAckMany measures the worker's database work per batch of
// 100 jobs: one Reserve and one AckMany.
func BenchmarkReserveAckMany(b *testing.B) {
	eachDialectB(b, func(b *testing.B, q queue.Queue) {
		const batch = 100
		bp := q.(queue.BatchPusher)
		acker := q.(queue.BatchAcker)
		fill := func() {
			jobs := make([]queue.Job, 2000)
			for i := range jobs {
				jobs[i] = queue.Job{ID: queue.NewID(), Name: "bench", Payload: []byte(fmt.Sprint(i))}
			}
			if _, err := bp.PushMany(b.Context(), jobs); err != nil {
				b.Fatal(err)
			}
		}
		fill()
		left := 2000
		for b.Loop() {
			if left < batch {
				b.StopTimer()
				fill()
				left += 2000
				b.StartTimer()
			}
			jobs, err := q.Reserve(b.Context(), nil, batch, time.Minute)
			if err != nil || len(jobs) != batch {
				b.Fatalf("Reserve = %d, %v", len(jobs), err)
			}
			leases := make([]queue.Lease, len(jobs))
			for i, j := range jobs {
				leases[i] = j.Lease()
			}
			if lost, err := acker.AckMany(b.Context(), leases); err != nil || len(lost) != 0 {
				b.Fatalf("AckMany = %v, %v", lost, err)
			}
			left -= batch
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
	})
}
