// Command csvimport imports CSV files as batches: every row is a typed job,
// and each file's batch has callback jobs that the store dispatches exactly
// once, whichever process finishes the last row:
//
//   - then (ImportSucceeded) when every row was imported,
//   - catch (ImportFailed) on the first row that was dead-lettered,
//   - finally (ImportFinished) when every row has finished either way.
//
// The first file imports cleanly (then and finally run); the second has a
// row without an e-mail address, which fails; its batch allows failures, so
// the other rows still import, catch reports the bad row and finally
// reports the counts, read from the store.
//
//	go run ./examples/csvimport                       # sqlite://meridian-csvimport.db
//	go run ./examples/csvimport -queue memory://
//	go run ./examples/csvimport -queue 'postgres://...'
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	_ "github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// The jobs of an import: one per row, and the three callbacks.
type (
	ImportRow struct {
		File, Name, Email string
		Line              int
	}
	ImportSucceeded struct{ File string }
	ImportFailed    struct{ File string }
	ImportFinished  struct{ File string }
)

// files are the CSV files the example imports.
var files = map[string]string{
	"clean.csv":  "name,email\nAda,ada@example.com\nGrace,grace@example.com\nKaren,karen@example.com\n",
	"broken.csv": "name,email\nEdsger,edsger@example.com\nBarbara,\nDonald,donald@example.com\n",
}

func main() {
	url := flag.String("queue", "sqlite://meridian-csvimport.db", "queue URL: sqlite://file, memory://, postgres://..., mysql://...")
	flag.Parse()
	if err := run(context.Background(), *url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// importBatch reads a CSV file into a batch: a job per row and the
// callbacks, on queue "import".
func importBatch(file string, r io.Reader) (queue.Batch, error) {
	b := queue.Batch{Name: "import " + file, AllowFailures: true}
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return b, fmt.Errorf("reading %s: %w", file, err)
	}
	for i, row := range rows[1:] { // rows[0] is the header
		j, err := queue.NewJob(ImportRow{File: file, Name: row[0], Email: row[1], Line: i + 2},
			queue.OnQueue("import"), queue.MaxAttempts(2))
		if err != nil {
			return b, err
		}
		b.Jobs = append(b.Jobs, j)
	}
	for _, cb := range []struct {
		to **queue.Job
		v  any
	}{{&b.Then, ImportSucceeded{file}}, {&b.Catch, ImportFailed{file}}, {&b.Finally, ImportFinished{file}}} {
		j, err := queue.NewJob(cb.v, queue.OnQueue("import"))
		if err != nil {
			return b, err
		}
		*cb.to = &j
	}
	return b, nil
}

// run opens the queue at url, imports both files and checks which
// callbacks ran.
func run(ctx context.Context, url string, out io.Writer) error {
	q, err := queue.Open(ctx, url)
	if err != nil {
		return err
	}
	defer q.Close()
	batches := driver.CapabilitiesOf(q).Workflows
	if batches == nil {
		return fmt.Errorf("%s does not keep batches", url)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	var mu sync.Mutex
	var imported []string
	callbacks := map[string][]string{} // file -> callbacks run
	finished := make(chan string, len(files))
	callback := func(file, what string) {
		mu.Lock()
		callbacks[file] = append(callbacks[file], what)
		mu.Unlock()
	}
	w := queue.NewWorker(q).Queues("import").Concurrency(4).Poll(20 * time.Millisecond).
		Backoff(10 * time.Millisecond).Slog(slog.New(slog.DiscardHandler))
	queue.Handle(w, func(ctx context.Context, r ImportRow) error {
		if !strings.Contains(r.Email, "@") {
			return queue.Permanent(fmt.Errorf("%s line %d: %q has no e-mail address", r.File, r.Line, r.Name))
		}
		mu.Lock()
		imported = append(imported, r.Name)
		mu.Unlock()
		return nil
	})
	queue.Handle(w, func(ctx context.Context, s ImportSucceeded) error {
		fmt.Fprintf(out, "%s: every row imported\n", s.File)
		callback(s.File, "then")
		return nil
	})
	queue.Handle(w, func(ctx context.Context, f ImportFailed) error {
		job, _ := queue.JobFromContext(ctx)
		fmt.Fprintf(out, "%s: a row failed: %s\n", f.File, job.Meta[queue.MetaBatchError])
		callback(f.File, "catch")
		return nil
	})
	queue.Handle(w, func(ctx context.Context, f ImportFinished) error {
		job, _ := queue.JobFromContext(ctx)
		b, err := batches.GetBatch(ctx, job.Meta[queue.MetaBatchOf])
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: finished: %d rows, %d imported, %d failed\n", f.File, b.Total, b.Done, b.Failed)
		callback(f.File, "finally")
		finished <- f.File
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()

	for _, file := range []string{"clean.csv", "broken.csv"} {
		b, err := importBatch(file, strings.NewReader(files[file]))
		if err != nil {
			return err
		}
		id, err := queue.DispatchBatch(ctx, q, b)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: batch %s of %d rows\n", file, id, len(b.Jobs))
	}
	for range files {
		select {
		case <-finished:
		case <-ctx.Done():
			return errors.New("the imports did not finish in time")
		}
	}
	// The then and catch callbacks were pushed with finally or before it;
	// wait until the queue has run them.
	for {
		n, err := q.Len(ctx, "import")
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d jobs still pending", n)
		case <-time.After(20 * time.Millisecond):
		}
	}
	w.Stop()
	if err := <-errc; err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for file, want := range map[string]string{"clean.csv": "finally then", "broken.csv": "catch finally"} {
		got := callbacks[file]
		slices.Sort(got)
		if strings.Join(got, " ") != want {
			return fmt.Errorf("%s ran callbacks %v, want %s once each", file, got, want)
		}
	}
	if len(imported) != 5 {
		return fmt.Errorf("imported %v, want the 5 rows with an address", imported)
	}
	return nil
}
