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
// A Hold job (the stall tests, stall_test.go) acts in a loop for
// FAULT_SLEEP: before each action it asks queue.Holding whether its lease
// (and its concurrency slot) still holds, and if so makes a write fenced by
// its lease token (an Extend of its own lease), recording "W id checked
// wrote ok|err" (the Unix nanoseconds of the check and of the write's
// return, then its outcome); once Holding reports the lease or slot lost it
// records "C id unixnano cause" and returns. With FAULT_SLOT set (a
// duration), jobs run under a Concurrency limit of 1 per job name, with
// that expiry. FAULT_QUEUES (comma-separated) names the queues it works.
//
// With FAULT_MODE=leader it runs no worker but a queue.Leader of the lease
// "stall" with TTL FAULT_LEASE: once elected it records "L epoch unixnano",
// then acts in a loop until its term ends: before each action it asks
// queue.Leading whether the term lasts, and if so makes a write fenced by
// the term's epoch (a periodic tick claim), recording "W epoch checked
// wrote ok|unclaimed|err" as a Hold job does; once the term is over it records
// "C epoch unixnano cause".
//
// FAULT_BALANCE (simple or auto) shares the Worker's handlers as a budget
// of FAULT_CONCURRENCY (Worker.Balance) instead of strict order.
//
// When a fleet command terminates its worker (queue.ErrTerminated) it
// exits with status 4 (terminate_test.go).
//
// The suite builds it without -race: it exercises the database and the
// processes, not the Go code.
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
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/balance"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// Work is an ordinary job.
type Work struct{ N int }

// Poison is a job whose handler ends the process.
type Poison struct{}

// Hold is a job that acts under its lease until it is lost.
type Hold struct{}

func main() {
	err := run()
	if errors.Is(err, queue.ErrTerminated) {
		os.Exit(4) // a fleet command terminated it (terminate_test.go)
	}
	if err != nil {
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
	if os.Getenv("FAULT_MODE") == "leader" {
		return lead(ctx, q, lease, record)
	}
	w := queue.NewWorker(q).
		Slog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))). // warnings too: a failed test prints this log
		Concurrency(conc).Poll(poll).Lease(lease).ShutdownTimeout(5 * time.Second)
	if b := os.Getenv("FAULT_BALANCE"); b != "" {
		w.Balance(balance.Options{Strategy: balance.Strategy(b), Max: conc})
	}
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
	hold := func(ctx context.Context, _ Hold) error {
		j, _ := queue.JobFromContext(ctx)
		if err := record("S %s %d %d", j.ID, time.Now().UnixNano(), j.Attempts); err != nil {
			return err
		}
		end := time.Now().Add(sleep)
		for time.Now().Before(end) {
			if err := queue.Holding(ctx); err != nil {
				_ = record("C %s %d %q", j.ID, time.Now().UnixNano(), err.Error())
				return err
			}
			checked := time.Now().UnixNano()
			outcome := "ok"
			lost, err := q.ExtendMany(context.WithoutCancel(ctx), []driver.Lease{j.Lease()}, lease)
			if err == nil && len(lost) > 0 {
				err = driver.ErrLeaseLost
			}
			if err != nil {
				outcome = strconv.Quote(err.Error())
			}
			if err := record("W %s %d %d %s", j.ID, checked, time.Now().UnixNano(), outcome); err != nil {
				return err
			}
			t := time.NewTimer(20 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		return record("E %s %d", j.ID, time.Now().UnixNano())
	}
	if qs := os.Getenv("FAULT_QUEUES"); qs != "" {
		w.Queues(strings.Split(qs, ",")...)
	}
	if s := os.Getenv("FAULT_SLOT"); s != "" {
		expiry, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("FAULT_SLOT: %w", err)
		}
		lim, err := queue.NewLimiter(q, nil)
		if err != nil {
			return err
		}
		mw, err := lim.Concurrency(queue.KeyByName, 1, expiry, 50*time.Millisecond)
		if err != nil {
			return err
		}
		w.Use(mw)
	}
	queue.Handle(w, hold)
	return w.Run(ctx)
}

// lead campaigns for the lease "stall" until ctx ends, acting while elected.
func lead(ctx context.Context, q *sqlqueue.Queue, ttl time.Duration, record func(string, ...any) error) error {
	const periodic = "stall"
	if _, err := q.RegisterPeriodic(ctx, driver.PeriodicInfo{Name: periodic, Schedule: "@every 1s"}); err != nil {
		return err
	}
	act := func(ctx context.Context) {
		epoch, _ := queue.LeaderEpoch(ctx)
		if record("L %d %d", epoch, time.Now().UnixNano()) != nil {
			return
		}
		for {
			if err := queue.Leading(ctx); err != nil {
				_ = record("C %d %d %q", epoch, time.Now().UnixNano(), err.Error())
				return
			}
			checked := time.Now()
			j, err := queue.NewJob(Work{}, queue.OnQueue("ticks"))
			if err != nil {
				return
			}
			tick := driver.PeriodicInfo{Name: periodic, Schedule: "@every 1s", LastTick: checked, NextTick: checked.Add(time.Second), LastJobID: j.ID}
			outcome := "ok"
			if claimed, err := q.ClaimTick(ctx, tick, j); err != nil {
				outcome = strconv.Quote(err.Error())
			} else if !claimed {
				outcome = "unclaimed"
			}
			if record("W %d %d %d %s", epoch, checked.UnixNano(), time.Now().UnixNano(), outcome) != nil {
				return
			}
			t := time.NewTimer(20 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	l, err := queue.NewLeader(q, periodic, queue.LeaderTTL(ttl), queue.LeaderRenew(ttl/5),
		queue.LeaderLogger(slog.New(slog.DiscardHandler)), queue.OnElected(act))
	if err != nil {
		return err
	}
	if err := l.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
