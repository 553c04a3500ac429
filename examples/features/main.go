// Command features walks through what a job can do beyond running once, on
// any driver (a SQLite file by default):
//
//   - a periodic job, registered by two workers, enqueued once per tick;
//
//   - a job type with its own queue, attempts and backoff;
//
//   - a handler that snoozes its job until it is ready;
//
//   - a running job cancelled from outside, and a waiting one;
//
//   - a key held for a while after its job finished (UniqueFor).
//
//     go run ./examples/features                         # sqlite://meridian-features.db
//     go run ./examples/features -queue memory://
//     go run ./examples/features -queue 'postgres://...'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// Heartbeat is the periodic job.
type Heartbeat struct{}

// Export carries its own options: its queue, two attempts, and a short
// backoff between them.
type Export struct{ Report string }

func (Export) Queue() string                     { return "exports" }
func (Export) MaxAttempts() int                  { return 2 }
func (Export) Backoff(attempt int) time.Duration { return 50 * time.Millisecond }

// Thumbnail waits for its source image: the handler snoozes until it is
// there, without using up attempts.
type Thumbnail struct{ Image string }

// handledTicks counts the heartbeat ticks handled so far.
func handledTicks(mu *sync.Mutex, ticks map[string]int) int {
	mu.Lock()
	defer mu.Unlock()
	return len(ticks)
}

// Crunch runs until it is cancelled.
type Crunch struct{ N int }

func main() {
	url := flag.String("queue", "sqlite://meridian-features.db", "queue URL: sqlite://file, memory://, postgres://..., mysql://...")
	flag.Parse()
	if err := run(context.Background(), *url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run opens the queue at url, runs the walk-through and reports on out.
func run(ctx context.Context, url string, out *os.File) error {
	q, err := queue.Open(ctx, url)
	if err != nil {
		return err
	}
	defer q.Close()
	quiet := slog.New(slog.DiscardHandler)
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	var mu sync.Mutex
	ticks := map[string]int{} // handled heartbeats by tick
	var exports atomic.Int32
	imageReady := time.Now().Add(300 * time.Millisecond)
	crunching := make(chan string, 1)
	crunchEnded := make(chan error, 1)
	var wg sync.WaitGroup
	// Two workers, as two processes would run them.
	for i := range 2 {
		w := queue.NewWorker(q).Queues(queue.DefaultQueue, "exports").Slog(quiet).Poll(20 * time.Millisecond)
		queue.Handle(w, func(ctx context.Context, _ Heartbeat) error {
			j, _ := queue.JobFromContext(ctx)
			mu.Lock()
			ticks[j.Meta[queue.MetaPeriodicTick]]++
			mu.Unlock()
			return nil
		})
		queue.Handle(w, func(ctx context.Context, e Export) error {
			if exports.Add(1) == 1 {
				return errors.New("the report service is warming up")
			}
			return nil
		})
		queue.Handle(w, func(ctx context.Context, th Thumbnail) error {
			if time.Now().Before(imageReady) {
				return queue.Snooze(100 * time.Millisecond) // not an attempt
			}
			j, _ := queue.JobFromContext(ctx)
			fmt.Fprintf(out, "thumbnail of %s made on attempt %d after %d snoozes\n", th.Image, j.Attempts, j.Snoozes)
			return nil
		})
		queue.Handle(w, func(ctx context.Context, c Crunch) error {
			j, _ := queue.JobFromContext(ctx)
			crunching <- j.ID
			<-ctx.Done()
			crunchEnded <- context.Cause(ctx)
			return ctx.Err()
		})
		if err := queue.Periodic(w, "heartbeat", queue.Every(time.Second), Heartbeat{}); err != nil {
			return err
		}
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				log.Printf("worker %d: %v", i, err)
			}
		})
	}
	defer wg.Wait()
	defer stop()

	if err := queue.Dispatch(ctx, q, Export{Report: "monthly"}); err != nil {
		return err
	}
	if err := queue.Dispatch(ctx, q, Thumbnail{Image: "cat.png"}); err != nil {
		return err
	}

	// Cancel a running job: its handler's context ends with ErrCancelled.
	if err := queue.Dispatch(ctx, q, Crunch{N: 1}); err != nil {
		return err
	}
	id := <-crunching
	if _, err := queue.CancelJob(ctx, q, id); err != nil {
		return err
	}
	fmt.Fprintf(out, "running job cancelled: %v\n", errors.Is(<-crunchEnded, queue.ErrCancelled))

	// Cancel a waiting one: it never runs.
	later, _, err := queue.Enqueue(ctx, q, Crunch{N: 2}, queue.Delay(time.Hour))
	if err != nil {
		return err
	}
	was, err := queue.CancelJob(ctx, q, later)
	fmt.Fprintf(out, "scheduled job cancelled (was %s): %v\n", was, err)

	// UniqueFor: one digest an hour, even after the first has run.
	_, dup1, err := queue.Enqueue(ctx, q, Export{Report: "digest"}, queue.UniqueFor("digest", time.Hour))
	if err != nil {
		return err
	}
	_, dup2, err := queue.Enqueue(ctx, q, Export{Report: "digest"}, queue.UniqueFor("digest", time.Hour))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "digest dispatched twice: first a duplicate %v, second a duplicate %v\n", dup1, dup2)

	// The monthly export fails once and is retried after its type's
	// backoff; the digest runs unless an earlier run still holds its key.
	wantExports := int32(2)
	if !dup1 {
		wantExports++
	}
	// Wait for the exports and two heartbeat ticks (two workers, one job
	// a tick).
	deadline := time.Now().Add(30 * time.Second)
	for exports.Load() < wantExports || handledTicks(&mu, ticks) < 2 {
		if time.Now().After(deadline) {
			return fmt.Errorf("after 30 s: %d export attempts (want %d), %d heartbeat ticks (want 2)", exports.Load(), wantExports, handledTicks(&mu, ticks))
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(out, "export attempts: %d (the first failed, the type's backoff retried it)\n", exports.Load())
	mu.Lock()
	defer mu.Unlock()
	for tick, n := range ticks {
		if n != 1 {
			return fmt.Errorf("heartbeat tick %s was handled %d times, want once", tick, n)
		}
	}
	fmt.Fprintf(out, "heartbeat ticks handled, each once across two workers: %d\n", len(ticks))
	return nil
}
