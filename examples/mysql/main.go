// Command mysql runs Meridian on MySQL 8 or MariaDB 10.6+ from the DSN a Go
// program already has for go-sql-driver/mysql. It delivers webhooks:
// a duplicate dispatch is skipped by its unique key, a delivery that can
// never succeed is dead-lettered at once, and once its endpoint is fixed the
// dead letter is retried, as an operator would from the dashboard or
// `meridian failed retry`.
//
//	go run ./examples/mysql -dsn 'root@tcp(127.0.0.1:3306)/test'
//
// The DSN defaults to $MYSQL_DSN. The program creates the tables
// mysqlexample_jobs* and drops them at the end unless -keep is given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/mysql"
)

// DeliverWebhook is the job.
type DeliverWebhook struct {
	Event    string `json:"event"`
	Endpoint string `json:"endpoint"`
}

func main() {
	dsn := flag.String("dsn", os.Getenv("MYSQL_DSN"), "go-sql-driver/mysql DSN, user:password@tcp(host:port)/database")
	keep := flag.Bool("keep", false, "keep the tables after the run")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "mysql: give -dsn or set MYSQL_DSN")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *dsn, "mysqlexample_jobs", !*keep, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mysql:", err)
		os.Exit(1)
	}
}

// errNoRoute is what the endpoint "disabled" answers until it is fixed.
var errNoRoute = errors.New("endpoint disabled by its owner")

// run delivers three webhooks, one of them twice and one to a disabled
// endpoint, then fixes the endpoint and retries its dead letter.
func run(ctx context.Context, dsn, table string, drop bool, out io.Writer) error {
	// Open creates the tables when missing (Setup); with migrations that
	// own the schema, apply sqlqueue.Schema(sqlqueue.MySQL) there instead.
	q, err := mysql.Open(ctx, dsn, sqlqueue.WithTable(table))
	if err != nil {
		return err
	}
	defer q.Close()
	if drop {
		defer func() { _ = q.DropTables(context.Background()) }()
	}

	var mu sync.Mutex
	disabled := true
	delivered := make(chan DeliverWebhook, 4)
	w := queue.NewWorker(q).MaxRetry(5).Poll(50 * time.Millisecond).Slog(slog.New(slog.NewTextHandler(io.Discard, nil)))
	queue.Handle(w, func(ctx context.Context, d DeliverWebhook) error {
		mu.Lock()
		off := disabled && d.Endpoint == "https://hooks.example.com/disabled"
		mu.Unlock()
		if off {
			// Retrying cannot help: dead-letter now, not after five tries.
			return queue.Permanent(errNoRoute)
		}
		delivered <- d
		return nil
	})
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()
	defer func() {
		w.Stop()
		<-runDone
	}()

	hooks := []DeliverWebhook{
		{Event: "order.paid", Endpoint: "https://hooks.example.com/shop"},
		{Event: "order.paid", Endpoint: "https://hooks.example.com/shop"}, // a retried request: skipped
		{Event: "order.paid", Endpoint: "https://hooks.example.com/disabled"},
	}
	for _, h := range hooks {
		_, dup, err := queue.Enqueue(ctx, q, h, queue.Unique(h.Event+" "+h.Endpoint))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "dispatch %s to %s: duplicate %v\n", h.Event, h.Endpoint, dup)
	}
	if err := expect(ctx, delivered, "https://hooks.example.com/shop", out); err != nil {
		return err
	}

	// The disabled endpoint's delivery is a dead letter, with its error.
	var dead []queue.Job
	for len(dead) == 0 {
		if dead, err = q.DeadLetters(ctx, "", 10); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the dead letter: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "dead letter after %d attempt: %s\n", dead[0].Attempts, dead[0].LastError)

	mu.Lock()
	disabled = false // the endpoint's owner turned it back on
	mu.Unlock()
	if err := q.RetryDead(ctx, dead[0].ID); err != nil {
		return err
	}
	return expect(ctx, delivered, "https://hooks.example.com/disabled", out)
}

// expect waits for the delivery to endpoint and prints it.
func expect(ctx context.Context, delivered <-chan DeliverWebhook, endpoint string, out io.Writer) error {
	select {
	case d := <-delivered:
		if d.Endpoint != endpoint {
			return fmt.Errorf("delivered to %s, want %s", d.Endpoint, endpoint)
		}
		fmt.Fprintf(out, "delivered %s to %s\n", d.Event, d.Endpoint)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the delivery to %s: %w", endpoint, ctx.Err())
	}
}
