// Command sqlite keeps its jobs in a SQLite file, so they outlive the
// process that dispatched them: the program dispatches thumbnails to make
// and closes the queue as a web process would on exit, then opens the same
// file again, as a worker process would, and works them. No server, no cgo
// (modernc.org/sqlite).
//
//	go run ./examples/sqlite                   # thumbnails.db in the working directory
//	go run ./examples/sqlite -db /tmp/jobs.db
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

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// MakeThumbnail is the job.
type MakeThumbnail struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func main() {
	path := flag.String("db", "thumbnails.db", "SQLite file holding the jobs")
	flag.Parse()
	if err := run(context.Background(), *path, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sqlite:", err)
		os.Exit(1)
	}
}

var images = []string{"cat.png", "dog.png", "owl.png"}

// run dispatches one job per image into the file at path, closes it, then
// reopens it and works every job, printing what happens to out.
func run(ctx context.Context, path string, out io.Writer) error {
	if err := dispatch(ctx, path); err != nil {
		return fmt.Errorf("dispatching: %w", err)
	}
	return work(ctx, path, out)
}

// dispatch is the producer's side: open (creating the file and its tables
// on first use), dispatch, close.
func dispatch(ctx context.Context, path string) error {
	q, err := sqlite.Open(ctx, path,
		sqlqueue.WithTable("thumbnail_jobs"),
		sqlqueue.WithRetention(24*time.Hour, 7*24*time.Hour)) // keep done jobs a day, dead ones a week
	if err != nil {
		return err
	}
	defer q.Close()
	for _, img := range images {
		// The unique key makes a second run of the producer (or a retried
		// web request) a no-op while the first job is still pending.
		if err := queue.Dispatch(ctx, q, MakeThumbnail{Image: img, Width: 128}, queue.Unique("thumb:"+img)); err != nil {
			return err
		}
	}
	return nil
}

// work is the worker process's side: the jobs are in the file, not in
// this process's memory.
func work(ctx context.Context, path string, out io.Writer) error {
	q, err := sqlite.Open(ctx, path, sqlqueue.WithTable("thumbnail_jobs"))
	if err != nil {
		return err
	}
	defer q.Close()
	n, err := q.Len(ctx, queue.DefaultQueue)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "jobs waiting in %s: %d\n", path, n)

	// One goroutine keeps the output in dispatch order; a real worker
	// would leave the default concurrency.
	w := queue.NewWorker(q).Concurrency(1).Poll(100 * time.Millisecond)
	var mu sync.Mutex
	left := len(images)
	done := make(chan struct{})
	queue.Handle(w, func(ctx context.Context, t MakeThumbnail) error {
		fmt.Fprintf(out, "thumbnail of %s at %dpx\n", t.Image, t.Width)
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
