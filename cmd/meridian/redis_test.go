package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// TestRedis runs commands on a redis:// queue (the server of
// testutil.RedisEnv, a prefix of the test's own): the ones the core
// contract serves work through openExisting's setup=false; stats and jobs
// list read through the Inspector ability.
func TestRedis(t *testing.T) {
	t.Parallel()
	dsn := redisDSN(t)

	q, err := queue.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("queue.Open(%s): %v", dsn, err)
	}
	defer q.Close()
	if err := q.Push(t.Context(), queue.Job{Name: "n", Payload: []byte(`{}`)}); err != nil {
		t.Fatalf("Push: %v", err)
	}

	if code, out, errOut := runCLI(t, "", "failed", "list", "--dsn", dsn); code != exitOK {
		t.Errorf("failed list exited %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "", "purge", "--queue", queue.DefaultQueue, "--yes", "--dsn", dsn); code != exitOK {
		t.Errorf("purge exited %d: %s%s", code, out, errOut)
	}
	if n, err := q.Len(t.Context(), queue.DefaultQueue); err != nil || n != 0 {
		t.Errorf("after purge Len = %d, %v; want 0", n, err)
	}
	if err := q.Push(t.Context(), queue.Job{ID: "cli-listed", Name: "n", Payload: []byte(`{}`)}); err != nil {
		t.Fatalf("Push: %v", err)
	}
	for _, args := range [][]string{{"stats"}, {"jobs", "list"}} {
		code, out, errOut := runCLI(t, "", append(args, "--dsn", dsn)...)
		if code != exitOK || !strings.Contains(out, queue.DefaultQueue) {
			t.Errorf("%s exited %d with %s%s; want exit 0 and queue %s shown", args, code, out, errOut, queue.DefaultQueue)
		}
	}
}

// redisDSN returns a redis:// queue URL on the server of
// testutil.RedisEnv with a prefix of the test's own, whose keys are
// deleted when the test ends.
func redisDSN(t *testing.T) string {
	t.Helper()
	addr := testutil.DSN(t, testutil.RedisEnv)
	if !strings.Contains(addr, "://") {
		addr = "redis://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatalf("%s: %v", testutil.RedisEnv, err)
	}
	p := testutil.Name("cli")
	v := u.Query()
	v.Set("prefix", p)
	u.RawQuery = v.Encode()
	dsn := u.String()
	t.Cleanup(func() { dropRedisKeys(t, dsn, p) })
	return dsn
}

// dropRedisKeys deletes the keys of prefix p on the server of dsn.
func dropRedisKeys(t *testing.T, dsn, p string) {
	o, err := redis.ParseURL(strings.Split(dsn, "?")[0])
	if err != nil {
		t.Errorf("parsing %s: %v", dsn, err)
		return
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
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
}
