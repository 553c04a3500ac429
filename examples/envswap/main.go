// Command envswap picks its queue from the environment, so one build runs
// on an in-memory queue in unit tests, a SQLite file on a laptop and
// PostgreSQL or MySQL in production, with the same job code: only
// QUEUE_URL changes.
//
//	go run ./examples/envswap                                   # sqlite://envswap.db
//	QUEUE_URL=memory:// go run ./examples/envswap
//	QUEUE_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' go run ./examples/envswap
//	QUEUE_URL='mysql://root@127.0.0.1:3306/test' go run ./examples/envswap
//
// Every driver's package is imported for its side effect: it registers its
// URL scheme with queue.Open. Import only those you deploy to keep the
// others out of the binary.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/meridianjobs/meridian/memqueue" // memory://
	"github.com/meridianjobs/meridian/queue"
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"    // mysql://
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres" // postgres://
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"   // sqlite://
)

// GenerateReport is the job, the same whatever stores it.
type GenerateReport struct {
	Account string `json:"account"`
	Month   string `json:"month"`
}

func main() {
	url := os.Getenv("QUEUE_URL")
	if url == "" {
		url = "sqlite://envswap.db"
	}
	// The library installs no signal handler: stop on Ctrl-C here.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, url, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "envswap:", err)
		os.Exit(1)
	}
}

// run opens the queue url names, dispatches a report and works it.
func run(ctx context.Context, url string, out io.Writer) error {
	q, err := queue.Open(ctx, url)
	if err != nil {
		return err // an unknown scheme names the registered ones
	}
	defer q.Close()

	done := make(chan GenerateReport, 1)
	w := queue.NewWorker(q).Poll(100 * time.Millisecond)
	queue.Handle(w, func(ctx context.Context, r GenerateReport) error {
		done <- r
		return nil
	})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()
	defer func() {
		w.Stop()
		<-runDone
	}()

	if err := queue.Dispatch(ctx, q, GenerateReport{Account: "acme", Month: "2026-10"}); err != nil {
		return err
	}
	select {
	case r := <-done:
		fmt.Fprintf(out, "report for %s, %s\n", r.Account, r.Month)
		return nil
	case <-ctx.Done():
		return errors.New("the report was not generated in time")
	}
}
