package redisqueue_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// clusterClient returns a client of the test Cluster
// (testutil.RedisClusterEnv), closed when the test ends. It skips the
// test when the variable is unset, and fails it under CI=true.
func clusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	addrs := strings.Split(testutil.DSN(t, testutil.RedisClusterEnv), ",")
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		testutil.Unreachable(t, testutil.RedisClusterEnv, err)
	}
	return rdb
}

// clusterPrefix returns a key prefix of the test's own on the Cluster and
// deletes every key under it, on every master, when the test ends.
func clusterPrefix(t testing.TB, rdb *redis.ClusterClient) string {
	t.Helper()
	p := testutil.Name("mc")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			// A node refuses a command over keys of several slots: one
			// UNLINK per key, in one pipeline.
			var keys []string
			iter := c.Scan(ctx, 0, "{"+p+"[:}]*", 1000).Iterator()
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil || len(keys) == 0 {
				return err
			}
			pipe := c.Pipeline()
			for _, k := range keys {
				pipe.Unlink(ctx, k)
			}
			_, err := pipe.Exec(ctx)
			return err
		})
		if err != nil {
			t.Errorf("deleting the keys of prefix %s: %v", p, err)
		}
	})
	return p
}

// TestContractCluster runs the conformance suite against the Redis
// Cluster of testutil.RedisClusterEnv: each check on a prefix of its own,
// its queues' keys spread over the masters by their hash tags.
func TestContractCluster(t *testing.T) {
	rdb := clusterClient(t)
	var mu sync.Mutex
	prefixes := map[queue.Queue]string{}
	contracttest.Run(t, contracttest.Harness{
		New: func(t *testing.T) queue.Queue {
			p := clusterPrefix(t, rdb)
			q := newQueue(t, rdb, p)
			mu.Lock()
			prefixes[q] = p
			mu.Unlock()
			return q
		},
		Peer: func(t *testing.T, q queue.Queue) queue.Queue {
			mu.Lock()
			p := prefixes[q]
			mu.Unlock()
			return newQueue(t, clusterClient(t), p)
		},
		Caps: contracttest.Capabilities{
			NoDoneRetention:  "redisqueue deletes a job when it is done or cancelled",
			NoAttemptHistory: "redisqueue keeps no attempt history",
			IDsPerQueue:      "on a Redis Cluster redisqueue holds an ID unique within its queue (docs/drivers.md)",
			NoFieldSearch:    "redisqueue's scripts search one substring of the payload",
		},
	})
}

// TestTickStepsResumeCluster stops ClaimTick on a Cluster between its two
// steps, as a process killed there would stop, and checks what
// docs/drivers.md says: the tick is claimed and its job not yet in its
// queue; the next ClaimTick of the periodic job, by another process,
// pushes it first, once; a claim of a tick already claimed pushes
// nothing.
func TestTickStepsResumeCluster(t *testing.T) {
	t.Parallel()
	rdb := clusterClient(t)
	p := clusterPrefix(t, rdb)
	killed := newQueue(t, rdb, p)
	redisqueue.SetBatchHook(killed, killedAt("tick-claimed"))
	peer := newQueue(t, clusterClient(t), p)
	ctx := t.Context()
	t0 := time.Now().Truncate(time.Minute)
	info := func(tick time.Time) driver.PeriodicInfo {
		return driver.PeriodicInfo{Name: "every-minute", Schedule: "@every 1m", LastTick: tick, NextTick: tick.Add(time.Minute)}
	}
	if _, err := killed.RegisterPeriodic(ctx, driver.PeriodicInfo{Name: "every-minute", Schedule: "@every 1m"}); err != nil {
		t.Fatal(err)
	}
	first := queue.Job{ID: driver.NewID(), Queue: "ticks", Name: "tick"}
	if ok, err := killed.ClaimTick(ctx, info(t0), first); err != nil || !ok {
		t.Fatalf("ClaimTick cut after step 1 = %v, %v; want claimed", ok, err)
	}
	ps, err := peer.Periodics(ctx)
	if err != nil || len(ps) != 1 || !ps[0].LastTick.Equal(t0) || ps[0].LastJobID != first.ID {
		t.Fatalf("Periodics after step 1 = %+v, %v; want the tick %v claimed with job %s", ps, err, t0, first.ID)
	}
	if n, err := peer.Len(ctx, "ticks"); err != nil || n != 0 {
		t.Fatalf("Len(ticks) after step 1 = %d, %v; want 0 (not yet pushed)", n, err)
	}
	// The same tick again claims nothing and pushes nothing new; the next
	// one, by the peer, pushes the noted job first.
	again := queue.Job{ID: driver.NewID(), Queue: "ticks", Name: "tick"}
	if ok, err := peer.ClaimTick(ctx, info(t0), again); err != nil || ok {
		t.Fatalf("ClaimTick of the claimed tick = %v, %v; want not claimed", ok, err)
	}
	second := queue.Job{ID: driver.NewID(), Queue: "ticks", Name: "tick"}
	if ok, err := peer.ClaimTick(ctx, info(t0.Add(time.Minute)), second); err != nil || !ok {
		t.Fatalf("ClaimTick of the next tick = %v, %v; want claimed", ok, err)
	}
	if ok, err := peer.ClaimTick(ctx, info(t0.Add(time.Minute)), again); err != nil || ok {
		t.Fatalf("ClaimTick of the next tick again = %v, %v; want not claimed", ok, err)
	}
	jobs, err := peer.Reserve(ctx, []string{"ticks"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.ID)
	}
	if want := []string{first.ID, second.ID}; !slices.Equal(got, want) {
		t.Fatalf("jobs of the ticks = %v, want %v: each tick's job once, the cut one first", got, want)
	}
}
