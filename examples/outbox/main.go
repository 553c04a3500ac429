// Command outbox enqueues jobs inside the application's own database/sql
// transaction (the transactional outbox): an order's row and the job that
// emails its receipt commit together or not at all, so a crash between
// them can neither lose the email nor send one for an order that was
// rolled back. It uses sqlx over whichever driver the application already
// has; examples/txenqueue does the same with a pgx.Tx.
//
//	go run ./examples/outbox                                    # SQLite file outbox.db
//	go run ./examples/outbox -driver pgx -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./examples/outbox -driver mysql -dsn 'root@tcp(127.0.0.1:3306)/test'
//
// It creates the tables outbox_orders and outbox_jobs* and drops them at
// the end unless -keep is given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql" // "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite" // "sqlite"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// EmailReceipt is the job.
type EmailReceipt struct {
	OrderID string `json:"order_id"`
}

func main() {
	driver := flag.String("driver", "sqlite", "database/sql driver: sqlite, pgx or mysql")
	dsn := flag.String("dsn", "outbox.db", "the driver's DSN")
	keep := flag.Bool("keep", false, "keep the tables after the run")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *driver, *dsn, "outbox", !*keep, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		os.Exit(1)
	}
}

var errDeclined = errors.New("payment declined")

// run places two orders, one whose payment is declined (its transaction
// rolls back) and one that commits, and runs a worker until the committed
// order's receipt is sent. Tables are named after prefix.
func run(ctx context.Context, driver, dsn, prefix string, drop bool, out io.Writer) error {
	db, err := sqlx.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	// The application's *sqlx.DB is the queue's too: no second pool.
	q, err := sqlqueue.New(db, sqlqueue.WithTable(prefix+"_jobs"))
	if err != nil {
		return err
	}
	defer q.Close()
	if err := q.Setup(ctx); err != nil {
		return err
	}
	orders := prefix + "_orders"
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+orders+" (id VARCHAR(64) PRIMARY KEY, total_cents BIGINT NOT NULL)"); err != nil {
		return err
	}
	if drop {
		defer func() {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+orders)
			_ = q.DropTables(context.Background())
		}()
	}

	// placeOrder stores the order and its receipt job in one transaction;
	// pay decides whether it commits.
	placeOrder := func(id string, cents int64, pay func() error) (err error) {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		if _, err := tx.ExecContext(ctx, db.Rebind("INSERT INTO "+orders+" (id, total_cents) VALUES (?, ?)"), id, cents); err != nil {
			return err
		}
		// q.Tx(tx) pushes through the transaction: on SQLite, whose one
		// connection tx holds, pushing through q instead would wait for ever.
		if err := queue.Dispatch(ctx, q.Tx(tx), EmailReceipt{OrderID: id}); err != nil {
			return err
		}
		if err := pay(); err != nil {
			return err
		}
		return tx.Commit()
	}

	if err := placeOrder("A-1", 1999, func() error { return errDeclined }); !errors.Is(err, errDeclined) {
		return fmt.Errorf("an order whose payment is declined: %v", err)
	}
	n, err := q.Len(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "jobs after a declined order:", n)

	if err := placeOrder("A-2", 4500, func() error { return nil }); err != nil {
		return fmt.Errorf("placing an order: %w", err)
	}
	sent := make(chan EmailReceipt, 1)
	w := queue.NewWorker(q).Poll(50 * time.Millisecond).Slog(slog.New(slog.NewTextHandler(io.Discard, nil)))
	queue.Handle(w, func(ctx context.Context, r EmailReceipt) error {
		sent <- r
		return nil
	})
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()
	select {
	case r := <-sent:
		var cents int64
		if err := db.GetContext(ctx, &cents, db.Rebind("SELECT total_cents FROM "+orders+" WHERE id = ?"), r.OrderID); err != nil {
			return err
		}
		fmt.Fprintf(out, "receipt for order %s (%d cents)\n", r.OrderID, cents)
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
