// Command worker is the worker process of sqlqueue's multi-process tests:
// a queue.Worker over the table and database its environment names, until
// SIGTERM. For every job it handles it appends "id start end attempt"
// (Unix nanoseconds, then the job's attempt number: 2 or more when an
// earlier lease on it was lost) to the log file before returning, so a SIGKILL loses no
// record of a job that was acked. The tests build it without -race: it
// exercises the database, not the Go code, and modernc.org/sqlite under the
// race detector is too slow for 20,000 jobs on a small machine.
//
// With WORKER_HOLD_AFTER=N, every job after the process's first N is held:
// its handler writes "held id" to the log file named by WORKER_HOLD_LOG and
// waits until the process is stopped, so a test that kills the process
// then knows it holds a job.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
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
	holdAfter := int64(-1)
	if v := os.Getenv("WORKER_HOLD_AFTER"); v != "" {
		if holdAfter, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("WORKER_HOLD_AFTER: %w", err)
		}
	}
	var started atomic.Int64
	queue.Handle(w, func(ctx context.Context, _ procJob) error {
		j, _ := queue.JobFromContext(ctx)
		if holdAfter >= 0 && started.Add(1) > holdAfter {
			if err := appendLine(os.Getenv("WORKER_HOLD_LOG"), "held "+j.ID); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}
		start := time.Now()
		time.Sleep(sleep)
		_, err := fmt.Fprintf(f, "%s %d %d %d\n", j.ID, start.UnixNano(), time.Now().UnixNano(), j.Attempts)
		return err
	})
	return w.Run(ctx)
}

// appendLine appends line and a newline to the file at path.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}
