package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres" // postgres://
)

type replicaJob struct{ N int }

// openPostgres opens the shared PostgreSQL queue twice, as two replicas of
// an application would, on a table of the test's own.
func openPostgres(t *testing.T) (a, b queue.Queue) {
	t.Helper()
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("table", "dash_replicas_"+driver.NewID()[20:])
	u.RawQuery = v.Encode()
	open := func() queue.Queue {
		q, err := queue.Open(context.Background(), u.String())
		if err != nil {
			t.Fatalf("opening PostgreSQL (is it running?): %v", err)
		}
		return q
	}
	a, b = open(), open()
	t.Cleanup(func() {
		if d, ok := a.(interface{ DropTables(context.Context) error }); ok {
			if err := d.DropTables(context.Background()); err != nil {
				t.Errorf("dropping the test tables: %v", err)
			}
		}
		for _, q := range []queue.Queue{a, b} {
			if c, ok := q.(io.Closer); ok {
				c.Close()
			}
		}
	})
	return a, b
}

// Two worker processes over one PostgreSQL (or one Redis), each replica
// with its own dashboard: both dashboards show the same figures, summed
// over both workers.
func TestReplicasShowTheSameNumbers(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) (a, b queue.Queue){
		"postgres": openPostgres,
		"redis":    openRedis,
	} {
		t.Run(name, func(t *testing.T) {
			qa, qb := open(t)
			testReplicasShowTheSameNumbers(t, qa, qb)
		})
	}
}

func testReplicasShowTheSameNumbers(t *testing.T, qa, qb queue.Queue) {
	ctx, cancel := context.WithCancel(context.Background())
	var handled [2]atomic.Int32
	errc := make(chan error, 2)
	for i, q := range []queue.Queue{qa, qb} {
		w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler)).Concurrency(1).Poll(20 * time.Millisecond)
		queue.Handle(w, func(ctx context.Context, j replicaJob) error {
			handled[i].Add(1)
			if j.N%5 == 0 {
				return queue.Permanent(errors.New("refused"))
			}
			return nil
		})
		go func() { errc <- w.Run(ctx) }()
	}
	defer func() {
		cancel()
		<-errc
		<-errc
	}()
	for n := range 40 {
		q := qa
		if n%2 == 1 {
			q = qb
		}
		if err := queue.Dispatch(ctx, q, replicaJob{N: n}, queue.OnQueue(queue.DefaultQueue)); err != nil {
			t.Fatal(err)
		}
	}
	sa := serve(t, dashboard.ForQueue(qa))
	sb := serve(t, dashboard.ForQueue(qb))
	stats := func(s *site) dashboard.StatsView {
		var sv dashboard.StatsView
		if err := json.Unmarshal([]byte(s.page("api/stats").Body), &sv); err != nil {
			t.Fatal(err)
		}
		return sv
	}
	var sv dashboard.StatsView
	if !testutil.WaitFor(20*time.Second, func() bool {
		sv = stats(sa)
		if sv.Totals.Processed == 32 && sv.Totals.Failed == 8 && sv.Totals.Dead.N == 8 && sv.Totals.Ready.N == 0 {
			return true
		}
		if sv.Totals.Ready.N == 0 && sv.Totals.Running.N == 0 && sv.Totals.Dead.N == 8 {
			// Every job has run. The driver writes run metrics with its
			// next ack or heartbeat; flush them now rather than wait.
			for _, q := range []queue.Queue{qa, qb} {
				if f, ok := q.(interface{ FlushMetrics(context.Context) error }); ok {
					if err := f.FlushMetrics(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		return false
	}) {
		t.Fatalf("replica A never showed 32 processed and 8 failed: %+v (handled %d + %d)", sv.Totals, handled[0].Load(), handled[1].Load())
	}
	a, b := stats(sa), stats(sb)
	if len(a.Queues) != 1 || len(b.Queues) != 1 {
		t.Fatalf("queues: %d and %d, want 1", len(a.Queues), len(b.Queues))
	}
	qa1, qb1 := a.Queues[0], b.Queues[0]
	if qa1.Processed != qb1.Processed || qa1.Failed != qb1.Failed || qa1.Dead != qb1.Dead || qa1.Ready != qb1.Ready {
		t.Errorf("replicas disagree:\nA %+v\nB %+v", qa1.QueueStats, qb1.QueueStats)
	}
	for name, s := range map[string]*site{"A": sa, "B": sb} {
		rows := findAll(s.page("workers").Doc, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" })
		if len(rows) != 2 {
			t.Errorf("replica %s lists %d workers, want both", name, len(rows))
		}
		if got := rowIDs(s.page("failed").Doc); len(got) != 8 {
			t.Errorf("replica %s lists %d failed jobs, want 8", name, len(got))
		}
	}
}

// BenchmarkPagesPostgres measures the first page of each view over a
// PostgreSQL table holding MERIDIAN_DASHBOARD_BENCH_JOBS ready jobs
// (default 1,000,000) and 5,000 dead letters. Every view must stay within
// the bounded Inspector calls, so none may grow with the table: the target
// is under 100 ms a page. The table is filled at the start and dropped at
// the end.
//
//	MERIDIAN_POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test ./dashboard -run '^$' -bench PagesPostgres -benchtime 20x
func BenchmarkPagesPostgres(b *testing.B) {
	dsn := os.Getenv("MERIDIAN_POSTGRES_DSN")
	if dsn == "" {
		b.Skip("MERIDIAN_POSTGRES_DSN is not set")
	}
	n := 1_000_000
	if s := os.Getenv("MERIDIAN_DASHBOARD_BENCH_JOBS"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	v := u.Query()
	v.Set("table", "dash_bench_"+driver.NewID()[20:])
	u.RawQuery = v.Encode()
	q, err := queue.Open(ctx, u.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if d, ok := q.(interface{ DropTables(context.Context) error }); ok {
			_ = d.DropTables(context.Background())
		}
		if c, ok := q.(io.Closer); ok {
			c.Close()
		}
	})
	const chunk = 10_000
	for done := 0; done < n; done += chunk {
		jobs := make([]queue.Job, min(chunk, n-done))
		for i := range jobs {
			jobs[i] = queue.Job{ID: driver.NewID(), Queue: []string{"emails", "reports", "default"}[(done+i)%3], Name: "Job",
				Payload: fmt.Appendf(nil, `{"n":%d,"user":"u%d@example.com"}`, done+i, done+i), Tags: []string{"bench"}}
		}
		if _, err := queue.PushMany(ctx, q, jobs); err != nil {
			b.Fatal(err)
		}
	}
	for dead := 0; dead < 5000; {
		got, err := q.Reserve(ctx, []string{"emails"}, 500, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			break // fewer jobs than that in "emails" (MERIDIAN_DASHBOARD_BENCH_JOBS)
		}
		for _, j := range got {
			if err := testutil.Fail(ctx, q, j.Lease(), "boom"); err != nil {
				b.Fatal(err)
			}
			dead++
		}
	}
	// The driver's inspection calls on their own, to tell the pages' cost
	// from the driver's.
	insp := q.(driver.Inspector)
	for name, call := range map[string]func() error{
		"QueueStats": func() error { _, err := insp.QueueStats(ctx); return err },
		"Metrics":    func() error { _, err := insp.Metrics(ctx, time.Now().Add(-time.Hour)); return err },
		"ListJobs/ready": func() error {
			_, err := insp.ListJobs(ctx, driver.JobFilter{State: queue.StateReady})
			return err
		},
		"ListJobs/ready/queue": func() error {
			_, err := insp.ListJobs(ctx, driver.JobFilter{State: queue.StateReady, Queue: "reports"})
			return err
		},
		"ListJobs/dead": func() error {
			_, err := insp.ListJobs(ctx, driver.JobFilter{State: queue.StateDead})
			return err
		},
	} {
		b.Run("driver="+name, func(b *testing.B) {
			for b.Loop() {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	benchPages(b, q, []string{"", "failed", "jobs?state=ready", "jobs?state=ready&queue=reports", "failed?q=u4242", "queue/emails", "workers"}...)
}
