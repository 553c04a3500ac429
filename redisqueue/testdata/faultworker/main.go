// Command faultworker is a worker process for redisqueue's durability
// test: it works the queue under FAULT_PREFIX on the Redis at FAULT_ADDR and
// appends a line to FAULT_LOG when a handler starts ("S id") and when it
// returns ("E id"), each line one write, so a SIGKILL leaves whole lines.
// Its Redis client retries for ever, so it rides out a server restart.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// Work is the test's job; N only tells jobs apart in a reader's eyes.
type Work struct {
	N int `json:"n"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "faultworker:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	lease, err := time.ParseDuration(os.Getenv("FAULT_LEASE"))
	if err != nil {
		return fmt.Errorf("FAULT_LEASE: %w", err)
	}
	f, err := os.OpenFile(os.Getenv("FAULT_LOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FAULT_ADDR"), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	q, err := redisqueue.New(rdb, redisqueue.WithPrefix(os.Getenv("FAULT_PREFIX")))
	if err != nil {
		return err
	}
	defer q.Close()
	w := queue.NewWorker(q).Concurrency(8).Poll(50 * time.Millisecond).Lease(lease).
		Slog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4})))
	queue.Handle(w, func(ctx context.Context, _ Work) error {
		j, _ := queue.JobFromContext(ctx)
		if _, err := f.WriteString("S " + j.ID + "\n"); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
		_, err := f.WriteString("E " + j.ID + "\n")
		return err
	})
	return w.Run(ctx)
}
