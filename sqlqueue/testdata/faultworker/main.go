// Command faultworker is the worker process of sqlqueue's fault suite
// (faults_test.go): a queue.Worker over the table and database its
// environment names, until SIGTERM or until something kills it.
//
// Its handlers record every attempt in the process's own file (FAULT_LOG),
// not in the queue: "S id unixnano attempt" when the handler starts and
// "E id unixnano" when it has done its work, each written with one write
// call before the handler goes on, so a SIGKILL loses no record of what
// ran. A Work job sleeps FAULT_SLEEP between the two; a Poison job exits
// the process (status 3) as soon as its start is recorded, as a handler
// that calls os.Exit or crashes the process would.
//
// The suite builds it without -race: it exercises the database and the
// processes, not the Go code.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// Work is an ordinary job.
type Work struct{ N int }

// Poison is a job whose handler ends the process.
type Poison struct{}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "faultworker:", err)
		os.Exit(1)
	}
}

func env(name string) (time.Duration, error) {
	d, err := time.ParseDuration(os.Getenv(name))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	lease, err := env("FAULT_LEASE")
	if err != nil {
		return err
	}
	poll, err := env("FAULT_POLL")
	if err != nil {
		return err
	}
	sleep, err := env("FAULT_SLEEP")
	if err != nil {
		return err
	}
	conc, err := strconv.Atoi(os.Getenv("FAULT_CONCURRENCY"))
	if err != nil {
		return fmt.Errorf("FAULT_CONCURRENCY: %w", err)
	}
	db, err := sql.Open(os.Getenv("FAULT_DRIVER"), os.Getenv("FAULT_SOURCE"))
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := sqlqueue.New(db, sqlqueue.WithTable(os.Getenv("FAULT_TABLE")), sqlqueue.WithRetention(time.Hour, 24*time.Hour))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(os.Getenv("FAULT_LOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	record := func(format string, args ...any) error {
		_, err := f.WriteString(fmt.Sprintf(format, args...) + "\n") // one write: whole or not at all
		return err
	}
	w := queue.NewWorker(q).
		Slog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))).
		Concurrency(conc).Poll(poll).Lease(lease).ShutdownTimeout(5 * time.Second)
	queue.Handle(w, func(ctx context.Context, _ Work) error {
		j, _ := queue.JobFromContext(ctx)
		if err := record("S %s %d %d", j.ID, time.Now().UnixNano(), j.Attempts); err != nil {
			return err
		}
		time.Sleep(sleep)
		return record("E %s %d", j.ID, time.Now().UnixNano())
	})
	queue.Handle(w, func(ctx context.Context, _ Poison) error {
		j, _ := queue.JobFromContext(ctx)
		if err := record("S %s %d %d", j.ID, time.Now().UnixNano(), j.Attempts); err != nil {
			return err
		}
		os.Exit(3)
		return nil
	})
	return w.Run(ctx)
}
