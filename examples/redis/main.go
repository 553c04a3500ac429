// Command redis keeps its jobs in Redis, with the client the program
// already has: a web handler's side dispatches welcome emails (one of them
// twice, which its unique key turns into a no-op) and a worker, woken by
// Redis pub/sub rather than by polling, sends them. Everything lives under a
// key prefix of its own, deleted at the end.
//
//	go run ./examples/redis                               # 127.0.0.1:6379, DB 0
//	go run ./examples/redis -url redis://cache:6379/3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// SendWelcomeEmail is the job.
type SendWelcomeEmail struct {
	UserID int    `json:"user_id"`
	Email  string `json:"email"`
}

func main() {
	url := flag.String("url", "redis://127.0.0.1:6379/0", "the Redis server, a redis:// URL")
	prefix := flag.String("prefix", "meridian_example", "the key prefix of the example's jobs, deleted at the end")
	flag.Parse()
	if err := run(context.Background(), *url, *prefix, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "redis:", err)
		os.Exit(1)
	}
}

var users = []SendWelcomeEmail{{1, "ada@example.com"}, {2, "grace@example.com"}, {3, "alan@example.com"}}

// run dispatches the emails, works them and deletes the prefix's keys.
func run(ctx context.Context, url, prefix string, out io.Writer) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts) // the client the application already has
	defer rdb.Close()
	q, err := redisqueue.New(rdb, redisqueue.WithPrefix(prefix))
	if err != nil {
		return err
	}
	defer q.Close()
	defer dropKeys(context.WithoutCancel(ctx), rdb, prefix)

	for _, u := range append(users, users[0]) { // the first user signs up twice
		if err := queue.Dispatch(ctx, q, u, queue.Unique(fmt.Sprint("welcome:", u.UserID))); err != nil {
			return err
		}
	}
	n, err := q.Len(ctx, queue.DefaultQueue)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "jobs waiting: %d\n", n)

	// An hour's poll: the worker is woken by Redis pub/sub, not polling.
	w := queue.NewWorker(q).Concurrency(1).Poll(time.Hour)
	var mu sync.Mutex
	left := len(users)
	done := make(chan struct{})
	queue.Handle(w, func(ctx context.Context, m SendWelcomeEmail) error {
		fmt.Fprintf(out, "welcome email to %s\n", m.Email)
		mu.Lock()
		defer mu.Unlock()
		if left--; left == 0 {
			close(done)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("the jobs were not worked in time")
	}
	w.Stop()
	if err := <-errc; err != nil {
		return err
	}
	n, err = q.Len(ctx, queue.DefaultQueue)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "jobs waiting after the worker: %d\n", n)
	return nil
}

// dropKeys deletes the keys under prefix: {prefix}:... and {prefix:queue}:...
func dropKeys(ctx context.Context, rdb *redis.Client, prefix string) {
	iter := rdb.Scan(ctx, 0, "{"+prefix+"[:}]*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Unlink(ctx, iter.Val())
	}
}
