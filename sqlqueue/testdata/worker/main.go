// Command worker is the worker process of sqlqueue's multi-process tests:
// a queue.Worker over the table and database its environment names, until
// SIGTERM. For every job it handles it appends "id start end attempt"
// (Unix nanoseconds, then the job's attempt number: 2 or more when an
// earlier lease on it was lost) to the log file before returning, so a SIGKILL loses no
// record of a job that was acked. The tests build it without -race: it
// exercises the database, not the Go code, and modernc.org/sqlite under the
// race detector is too slow for 20,000 jobs on a small machine.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

type procJob struct{ N int }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker process:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, err := sql.Open(os.Getenv("WORKER_DRIVER"), os.Getenv("WORKER_SOURCE"))
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := sqlqueue.New(db, sqlqueue.WithTable(os.Getenv("WORKER_TABLE")))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(os.Getenv("WORKER_LOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	lease, err := time.ParseDuration(os.Getenv("WORKER_LEASE"))
	if err != nil {
		return err
	}
	sleep, err := time.ParseDuration(os.Getenv("WORKER_SLEEP"))
	if err != nil {
		return err
	}
	w := queue.NewWorker(q).
		Slog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))).
		Concurrency(8).Poll(20 * time.Millisecond).Lease(lease).ShutdownTimeout(5 * time.Second)
	queue.Handle(w, func(ctx context.Context, _ procJob) error {
		j, _ := queue.JobFromContext(ctx)
		start := time.Now()
		time.Sleep(sleep)
		_, err := fmt.Fprintf(f, "%s %d %d %d\n", j.ID, start.UnixNano(), time.Now().UnixNano(), j.Attempts)
		return err
	})
	return w.Run(ctx)
}
