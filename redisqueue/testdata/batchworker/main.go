// Command batchworker is the worker process of redisqueue's
// TestBatchSIGKILL: a Worker over the queues "bm" and "cb" that handles the
// test's batch members and callbacks and logs each handling to a Redis
// list, so that the test can count them across processes it kills.
//
// Environment: BATCHWORKER_ADDR (host:port or a redis:// URL),
// BATCHWORKER_PREFIX. SIGTERM stops it.
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// The jobs of TestBatchSIGKILL (same type names, so the same job names).
type (
	member   struct{ N int }
	callback struct{}
)

func main() {
	addr, prefix := os.Getenv("BATCHWORKER_ADDR"), os.Getenv("BATCHWORKER_PREFIX")
	var o *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if o, err = redis.ParseURL(addr); err != nil {
			log.Fatal(err)
		}
	} else {
		o = &redis.Options{Addr: addr}
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	q, err := redisqueue.New(rdb, redisqueue.WithPrefix(prefix))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	logKey := "{" + prefix + "}:test:handled"
	record := func(ctx context.Context, entry string) error {
		return rdb.RPush(context.WithoutCancel(ctx), logKey, entry).Err()
	}
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler)).Queues("bm", "cb").
		Poll(50 * time.Millisecond).Concurrency(4).Lease(time.Second)
	queue.Handle(w, func(ctx context.Context, m member) error {
		time.Sleep(5 * time.Millisecond) // so that kills find members running
		return record(ctx, fmt.Sprintf("m:%d", m.N))
	})
	queue.Handle(w, func(ctx context.Context, _ callback) error {
		j, _ := queue.JobFromContext(ctx)
		// A callback run again after a kill has its CreatedAt; one pushed
		// twice would have two.
		return record(ctx, fmt.Sprintf("cb:%s:%d", j.Meta[queue.MetaBatchEvent], j.CreatedAt.UnixMilli()))
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
