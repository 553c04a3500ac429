// Command txenqueue enqueues a job inside the caller's own pgx
// transaction: a new user's row and the job that welcomes them commit
// together or not at all, and the worker, woken by LISTEN/NOTIFY, sees the
// job only once the transaction commits.
//
//	go run ./examples/txenqueue -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// The DSN defaults to $DATABASE_URL. The program creates its tables
// (txenqueue_users and the queue's txenqueue_jobs*) and drops them at the
// end unless -keep is given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// SendWelcome is the job: mail the user who just signed up.
type SendWelcome struct {
	UserID int64  `json:"user_id"`
	Email  string `json:"email"`
}

func main() {
	dsn := flag.String("dsn", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	keep := flag.Bool("keep", false, "keep the tables after the run")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("txenqueue: give -dsn or set DATABASE_URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *dsn, "txenqueue", !*keep, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run signs two users up, one in a transaction that commits and one in a
// transaction that rolls back, and runs a worker until the committed
// user's welcome job is handled. Tables are named after prefix.
func run(ctx context.Context, dsn, prefix string, drop bool, out io.Writer) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	q, err := postgres.New(ctx, pool, sqlqueue.WithTable(prefix+"_jobs"))
	if err != nil {
		return err
	}
	defer q.Close()
	if err := q.Setup(ctx); err != nil {
		return err
	}
	users := pgx.Identifier{prefix + "_users"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+users+" (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email TEXT NOT NULL UNIQUE)"); err != nil {
		return err
	}
	if drop {
		defer func() {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+users)
			_ = q.DropTables(context.Background())
		}()
	}

	// The worker waits on LISTEN/NOTIFY; Poll is only its safety net.
	handled := make(chan SendWelcome, 1)
	w := queue.NewWorker(q).Poll(30 * time.Second).Slog(slog.New(slog.NewTextHandler(io.Discard, nil)))
	queue.Handle(w, func(ctx context.Context, job SendWelcome) error {
		handled <- job
		return nil
	})
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()

	// signUp inserts the user and enqueues the welcome job in one
	// transaction, committed only if commit is true.
	signUp := func(email string, commit bool) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var id int64
			if err := tx.QueryRow(ctx, "INSERT INTO "+users+" (email) VALUES ($1) ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email RETURNING id", email).Scan(&id); err != nil {
				return err
			}
			if err := queue.Dispatch(ctx, q.Tx(tx), SendWelcome{UserID: id, Email: email}, queue.Unique("welcome:"+email)); err != nil {
				return err
			}
			if !commit {
				return errRolledBack
			}
			return nil
		})
	}

	if err := signUp("bob@example.com", false); !errors.Is(err, errRolledBack) {
		return fmt.Errorf("sign-up that rolls back: %v", err)
	}
	n, err := q.Len(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "jobs after a rolled-back sign-up:", n)

	start := time.Now()
	if err := signUp("ann@example.com", true); err != nil {
		return fmt.Errorf("sign-up: %w", err)
	}
	select {
	case job := <-handled:
		fmt.Fprintf(out, "welcome mail for %s (woken by NOTIFY: %v)\n", job.Email, time.Since(start) < 10*time.Second)
	case <-ctx.Done():
		return ctx.Err()
	}
	w.Stop()
	if err := <-runDone; err != nil {
		return err
	}
	n, err = q.Len(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "jobs after the worker:", n)
	return nil
}

var errRolledBack = errors.New("rolled back on purpose")
