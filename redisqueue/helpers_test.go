package redisqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// client returns a client of the test server (testutil.RedisEnv), closed
// when the test ends. It skips the test when the variable is unset, and
// fails it under CI=true, as the SQL tests do.
func client(t testing.TB) *redis.Client {
	t.Helper()
	addr := testutil.DSN(t, testutil.RedisEnv)
	var o *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if o, err = redis.ParseURL(addr); err != nil {
			t.Fatalf("%s: %v", testutil.RedisEnv, err)
		}
	} else {
		o = &redis.Options{Addr: addr}
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		testutil.Unreachable(t, testutil.RedisEnv, err)
	}
	return rdb
}

// prefix returns a key prefix of the test's own and deletes every key
// under it when the test ends.
func prefix(t testing.TB, rdb *redis.Client) string {
	t.Helper()
	p := testutil.Name("mt")
	t.Cleanup(func() { dropKeys(t, rdb, p) })
	return p
}

// dropKeys deletes the keys of prefix p: {p}:... and {p:queue}:... .
func dropKeys(t testing.TB, rdb *redis.Client, p string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, "{"+p+"[:}]*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			rdb.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scanning the keys of prefix %s: %v", p, err)
	}
	if len(keys) > 0 {
		if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
			t.Errorf("deleting the keys of prefix %s: %v", p, err)
		}
	}
}

// newQueue returns a Queue on rdb with prefix p, closed when the test
// ends.
func newQueue(t testing.TB, rdb redis.UniversalClient, p string) *redisqueue.Queue {
	t.Helper()
	q, err := redisqueue.New(rdb, redisqueue.WithPrefix(p))
	if err != nil {
		t.Fatalf("redisqueue.New: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// settleAcked waits up to d until every job unended returns (the pushes
// the server acknowledged that no worker has finished yet) is gone from
// q's store: a job still in the store after d is stuck, and the test
// fails naming it. It returns the jobs found gone without a worker
// finishing them, the lost ones, for the caller to hold against its
// durability bound. unended is called once per check; it does its own
// locking.
func settleAcked(t *testing.T, q *redisqueue.Queue, d time.Duration, unended func() []string) (lost []string) {
	t.Helper()
	var stuck []string
	settled := testutil.WaitFor(d, func() bool {
		lost, stuck = lost[:0], stuck[:0]
		for _, id := range unended() {
			_, err := q.GetJob(t.Context(), id)
			switch {
			case err == nil:
				stuck = append(stuck, id)
			case errors.Is(err, queue.ErrNotFound):
				lost = append(lost, id)
			default:
				t.Fatalf("GetJob(%s): %v", id, err)
			}
		}
		return len(stuck) == 0
	})
	if !settled {
		t.Errorf("%d acknowledged jobs still waiting or running %s after the last push, e.g. %s", len(stuck), d, stuck[0])
	}
	return lost
}
