package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	_ "github.com/meridianjobs/meridian/redisqueue" // redis://
)

// openRedis opens the Redis queue of MERIDIAN_REDIS_ADDR twice, as two
// replicas of an application would, through queue.Open with a key prefix
// of the test's own, whose keys it deletes when the test ends. It skips
// the test when the variable is unset and fails it under CI=true.
func openRedis(t *testing.T) (a, b queue.Queue) {
	t.Helper()
	return openRedisTB(t)
}

// openRedisTB is openRedis for a test or a benchmark.
func openRedisTB(t testing.TB) (a, b queue.Queue) {
	t.Helper()
	addr := testutil.DSN(t, testutil.RedisEnv)
	if !strings.Contains(addr, "://") {
		addr = "redis://" + addr
	}
	o, err := redis.ParseURL(addr)
	if err != nil {
		t.Fatalf("%s: %v", testutil.RedisEnv, err)
	}
	rdb := redis.NewClient(o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		testutil.Unreachable(t, testutil.RedisEnv, err)
	}
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.Name("dash")
	v := u.Query()
	v.Set("prefix", p)
	u.RawQuery = v.Encode()
	open := func() queue.Queue {
		q, err := queue.Open(context.Background(), u.String())
		if err != nil {
			t.Fatalf("opening Redis: %v", err)
		}
		return q
	}
	a, b = open(), open()
	t.Cleanup(func() {
		for _, q := range []queue.Queue{a, b} {
			if c, ok := q.(io.Closer); ok {
				c.Close()
			}
		}
		// A thousand keys per UNLINK: a benchmark leaves a million.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var keys []string
		drop := func() {
			if len(keys) > 0 {
				if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
					t.Errorf("deleting the keys of prefix %s: %v", p, err)
				}
				keys = keys[:0]
			}
		}
		iter := rdb.Scan(ctx, 0, "{"+p+"[:}]*", 1000).Iterator()
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 1000 {
				drop()
			}
		}
		drop()
		if err := iter.Err(); err != nil {
			t.Errorf("scanning the keys of prefix %s: %v", p, err)
		}
		rdb.Close()
	})
	return a, b
}

// openRedisOne is openRedis' first handle.
func openRedisOne(t *testing.T) queue.Queue {
	q, _ := openRedis(t)
	return q
}

// TestRedisGraphsPages walks the Graphs pages over a Redis queue, as
// TestGraphsPages does over memqueue.
func TestRedisGraphsPages(t *testing.T) {
	t.Parallel()
	testGraphsPages(t, openRedisOne(t))
}

// TestRedisPages serves every page over a Redis queue holding jobs in
// each state, a worker and run metrics: the dashboard finds every ability
// the inspection pages need, and each page shows what the store holds.
func TestRedisPages(t *testing.T) {
	t.Parallel()
	q := openRedisOne(t)
	ctx := t.Context()
	abilities := dashboard.ForQueue(q).Abilities()
	if !abilities.Browse || !abilities.ByState || !abilities.Shared || !abilities.Charts || !abilities.Runtime || !abilities.Workers || !abilities.Detail {
		t.Fatalf("ForQueue(redis).Abilities() = %+v; want Browse, ByState, Shared, Charts, Runtime, Workers and Detail", abilities)
	}
	dead := deadJobs(t, q, "mail", 3, `{"to":"a@example.com"}`, "smtp: 550 no such user")
	push := func(j queue.Job) {
		t.Helper()
		if err := q.Push(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	push(queue.Job{ID: "held", Queue: "mail", Name: "SendEmail"})
	held, err := q.Reserve(ctx, []string{"mail"}, 1, time.Hour)
	if err != nil || len(held) != 1 {
		t.Fatalf("Reserve = %v, %v", held, err)
	}
	push(queue.Job{ID: "waiting", Queue: "mail", Name: "SendEmail", Tags: []string{"welcome"}})
	push(queue.Job{ID: "later", Queue: "reports", Name: "Build", AvailableAt: time.Now().Add(time.Hour)})
	rep := q.(driver.Reporter)
	if err := rep.Heartbeat(ctx, driver.WorkerInfo{ID: "box-1", Host: "box", PID: 7, Queues: []string{"mail"}, Concurrency: 4,
		Reserved: map[string]int{"mail": 1}}); err != nil {
		t.Fatal(err)
	}
	rep.ObserveRun(driver.RunRecord{Queue: "mail", Name: "SendEmail", Start: time.Now(), Runtime: 20 * time.Millisecond, Outcome: driver.OutcomeDone, Attempts: 1})

	s := serve(t, dashboard.ForQueue(q))
	for _, tc := range []struct{ rel, want string }{
		{"", "reports"},
		{"queue/mail", "mail"},
		{"jobs?state=ready", "waiting"},
		{"jobs?state=ready&tag=welcome", "waiting"},
		{"jobs?state=scheduled", "later"},
		{"jobs?state=running", "held"},
		{"failed", dead[0]},
		{"failed?q=example", dead[2]},
		{"jobs/" + dead[1], "smtp: 550 no such user"},
		{"workers", "box-1"},
		{"api/stats", `"reports"`},
		{"api/metrics", `"processed": 1`},
		{"api/jobs?state=dead", dead[1]},
		{"api/workers", "box-1"},
	} {
		r := s.page(tc.rel)
		if r.StatusCode != 200 || !strings.Contains(r.Body, tc.want) {
			t.Errorf("GET %s: %d; want 200 and %q in:\n%s", tc.rel, r.StatusCode, tc.want, r.Body)
		}
	}
	var sv dashboard.StatsView
	if err := json.Unmarshal([]byte(s.page("api/stats").Body), &sv); err != nil {
		t.Fatal(err)
	}
	if sv.Totals.Ready.N != 1 || sv.Totals.Scheduled.N != 1 || sv.Totals.Running.N != 1 || sv.Totals.Dead.N != 3 {
		t.Errorf("api/stats totals = %+v; want 1 ready, 1 scheduled, 1 running, 3 dead", sv.Totals)
	}
}

// BenchmarkPagesRedis measures the first page of each view over a Redis
// prefix holding MERIDIAN_DASHBOARD_BENCH_JOBS ready jobs (default
// 1,000,000) in three queues and 5,000 dead letters, as
// BenchmarkPagesPostgres does over PostgreSQL: no view may grow with the
// number of jobs, and the target is under 100 ms a page. The jobs are
// pushed at the start and their keys deleted at the end.
//
//	MERIDIAN_REDIS_ADDR=redis://127.0.0.1:6379/0 \
//	  go test ./dashboard -run '^$' -bench PagesRedis -benchtime 20x
func BenchmarkPagesRedis(b *testing.B) {
	if os.Getenv(testutil.RedisEnv) == "" {
		b.Skip(testutil.RedisEnv + " is not set")
	}
	n := 1_000_000
	if s := os.Getenv("MERIDIAN_DASHBOARD_BENCH_JOBS"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	q, _ := openRedisTB(b)
	const chunk = 1000 // one script per chunk: a short hold of the server
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
			break
		}
		for _, j := range got {
			if err := testutil.Fail(ctx, q, j.Lease(), "boom"); err != nil {
				b.Fatal(err)
			}
			dead++
		}
	}
	insp := q.(driver.Inspector)
	for name, call := range map[string]func() error{
		"QueueStats":     func() error { _, err := insp.QueueStats(ctx); return err },
		"Counts":         func() error { _, err := insp.Counts(ctx); return err },
		"ListJobs/ready": func() error { _, err := insp.ListJobs(ctx, driver.JobFilter{State: queue.StateReady}); return err },
		"ListJobs/ready/queue": func() error {
			_, err := insp.ListJobs(ctx, driver.JobFilter{State: queue.StateReady, Queue: "reports"})
			return err
		},
		"ListJobs/dead": func() error { _, err := insp.ListJobs(ctx, driver.JobFilter{State: queue.StateDead}); return err },
		"ListJobs/search": func() error {
			_, err := insp.ListJobs(ctx, driver.JobFilter{State: queue.StateReady, Search: "u4242@"})
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
