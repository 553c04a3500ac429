package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
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
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, "{"+p+"[:}]*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := rdb.Unlink(ctx, iter.Val()).Err(); err != nil {
				t.Errorf("deleting %s: %v", iter.Val(), err)
			}
		}
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
