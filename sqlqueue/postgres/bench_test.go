package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// BenchmarkPushMany compares loading a batch with COPY (the path
// postgres.Queue's PushMany takes from copyMin jobs on) with sqlqueue's
// multi-row INSERT ... ON CONFLICT DO NOTHING (the embedded Queue's
// PushMany), on an empty table each time.
func BenchmarkPushMany(b *testing.B) {
	dsn := testDSN(b)
	q := newQueue(b, dsn)
	ctx := context.Background()
	for _, n := range []int{50, 250, 1000, 10000} {
		for _, mode := range []string{"copy", "insert"} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				push := func(ctx context.Context, jobs []queue.Job) ([]bool, error) { return postgres.PushCopy(q, ctx, jobs) }
				if mode == "insert" {
					push = q.Queue.PushMany
				}
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					if _, err := q.Pool().Exec(ctx, "TRUNCATE "+pgx.Identifier{q.Table()}.Sanitize()); err != nil {
						b.Fatal(err)
					}
					jobs := make([]queue.Job, n)
					for i := range jobs {
						jobs[i] = queue.Job{ID: queue.NewID(), Queue: "bench", Name: "SendWelcome",
							Payload: fmt.Appendf(nil, `{"user":%d,"email":"u%d@example.com"}`, i, i), Tags: []string{"bench"}}
					}
					b.StartTimer()
					stored, err := push(ctx, jobs)
					if err != nil || len(stored) != n || !stored[n-1] {
						b.Fatalf("PushMany: %d stored, %v", len(stored), err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
			})
		}
	}
}
