// Command postgres runs Meridian on PostgreSQL the way a service would:
// its own pgx pool, a bulk load by COPY, and a worker woken by
// LISTEN/NOTIFY rather than by polling. It prints how long single
// dispatches took to start with the worker's poll interval at 30 s, which
// only a notification can beat.
//
//	go run ./examples/postgres -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// The DSN defaults to $DATABASE_URL. The program creates the tables
// pgexample_jobs* and drops them at the end unless -keep is given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// IndexDocument is the job.
type IndexDocument struct {
	DocID      int       `json:"doc_id"`
	Dispatched time.Time `json:"dispatched"`
}

// Sizes of the run.
const (
	bulk   = 10_000 // jobs loaded by COPY
	single = 20     // jobs dispatched one at a time, each after the last started
)

func main() {
	dsn := flag.String("dsn", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	keep := flag.Bool("keep", false, "keep the tables after the run")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "postgres: give -dsn or set DATABASE_URL")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, *dsn, "pgexample_jobs", !*keep, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		os.Exit(1)
	}
}

// run loads bulk jobs, works them, then dispatches single jobs one by one
// and reports their dispatch-to-start times. The queue's tables are named
// after table, and dropped at the end when drop is true.
func run(ctx context.Context, dsn, table string, drop bool, out io.Writer) error {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.MaxConns = 8 // the worker's claims and acks, the dispatches, and the listener's one
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	// New takes one connection for LISTEN; Setup creates the tables (or
	// apply sqlqueue.Schema in your migrations and skip it).
	q, err := postgres.New(ctx, pool, sqlqueue.WithTable(table))
	if err != nil {
		return err
	}
	defer q.Close()
	if err := q.Setup(ctx); err != nil {
		return err
	}
	if drop {
		defer func() { _ = q.DropTables(context.Background()) }()
	}

	// A batch of more than a few hundred jobs goes in by COPY.
	docs := make([]IndexDocument, bulk)
	for i := range docs {
		docs[i].DocID = i + 1
	}
	n, err := queue.DispatchMany(ctx, q, docs)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded %d jobs\n", n)

	var worked atomic.Int64
	started := make(chan time.Duration, 1)
	// Poll is only the safety net: a push wakes the worker through NOTIFY.
	w := queue.NewWorker(q).Poll(30 * time.Second).Slog(slog.New(slog.NewTextHandler(io.Discard, nil)))
	queue.Handle(w, func(ctx context.Context, d IndexDocument) error {
		worked.Add(1)
		if !d.Dispatched.IsZero() {
			started <- time.Since(d.Dispatched)
		}
		return nil
	})
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()
	defer func() {
		w.Stop()
		<-runDone
	}()

	for worked.Load() < bulk {
		select {
		case <-ctx.Done():
			return fmt.Errorf("worked %d of %d loaded jobs: %w", worked.Load(), bulk, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "worked %d jobs\n", worked.Load())
	if err := q.Health(); err != nil {
		return fmt.Errorf("the listener is down: %w", err)
	}

	// Each single dispatch finds the worker idle, waiting on LISTEN.
	lat := make([]time.Duration, 0, single)
	for i := range single {
		time.Sleep(20 * time.Millisecond) // let the worker go back to waiting
		if err := queue.Dispatch(ctx, q, IndexDocument{DocID: bulk + i + 1, Dispatched: time.Now()}); err != nil {
			return err
		}
		select {
		case d := <-started:
			lat = append(lat, d)
		case <-time.After(10 * time.Second):
			return errors.New("a single dispatch did not start within 10 s: is LISTEN/NOTIFY blocked?")
		}
	}
	slices.Sort(lat)
	p50 := lat[len(lat)/2]
	fmt.Fprintf(os.Stderr, "dispatch-to-start over %d single jobs: p50 %v, max %v\n", single, p50.Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	fmt.Fprintf(out, "single dispatches woken by NOTIFY, well inside the 30 s poll: %v\n", p50 < time.Second)
	return nil
}
