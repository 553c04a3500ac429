// Command chain runs an image pipeline as a chain: resize, then watermark,
// then publish, each a typed job that starts only when the one before it
// succeeded. A second upload whose watermark step fails dead-letters that
// step, skips publishing, and dispatches the chain's catch job with the
// failure. DispatchChain is one Push, so through a transaction's Pusher
// (sqlqueue's Tx) a chain commits with the upload's own row or not at all.
//
//	go run ./examples/chain                       # sqlite://meridian-chain.db
//	go run ./examples/chain -queue memory://
//	go run ./examples/chain -queue 'postgres://...'
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
	"sync"
	"time"

	_ "github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// The steps of the pipeline. Each is an ordinary job type.
type (
	Resize    struct{ Image string }
	Watermark struct{ Image string }
	Publish   struct{ Image string }
	// PipelineFailed is the catch job: it learns the failed step from its
	// Meta (queue.MetaChainFailed, queue.MetaChainError).
	PipelineFailed struct{ Image string }
)

func main() {
	url := flag.String("queue", "sqlite://meridian-chain.db", "queue URL: sqlite://file, memory://, postgres://..., mysql://...")
	flag.Parse()
	if err := run(context.Background(), *url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// pipeline builds the chain for one image.
func pipeline(image string) (queue.Chain, error) {
	var c queue.Chain
	for _, v := range []any{Resize{image}, Watermark{image}, Publish{image}} {
		j, err := queue.NewJob(v, queue.OnQueue("images"), queue.MaxAttempts(2))
		if err != nil {
			return c, err
		}
		c.Steps = append(c.Steps, j)
	}
	catch, err := queue.NewJob(PipelineFailed{image}, queue.OnQueue("images"))
	if err != nil {
		return c, err
	}
	c.Catch = &catch
	return c, nil
}

// run opens the queue at url, runs two pipelines and checks what ran.
func run(ctx context.Context, url string, out io.Writer) error {
	q, err := queue.Open(ctx, url)
	if err != nil {
		return err
	}
	defer q.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	var mu sync.Mutex
	var ran []string
	caught := make(chan string, 1)
	step := func(what, image string) {
		mu.Lock()
		ran = append(ran, what+" "+image)
		mu.Unlock()
		fmt.Fprintln(out, what, image)
	}
	w := queue.NewWorker(q).Queues("images").Concurrency(4).Poll(20 * time.Millisecond).
		Backoff(10 * time.Millisecond).Slog(slog.New(slog.DiscardHandler))
	queue.Handle(w, func(ctx context.Context, j Resize) error { step("resized", j.Image); return nil })
	queue.Handle(w, func(ctx context.Context, j Watermark) error {
		if j.Image == "corrupt.png" {
			return errors.New("cannot decode corrupt.png")
		}
		step("watermarked", j.Image)
		return nil
	})
	queue.Handle(w, func(ctx context.Context, j Publish) error { step("published", j.Image); return nil })
	queue.Handle(w, func(ctx context.Context, j PipelineFailed) error {
		job, _ := queue.JobFromContext(ctx)
		fmt.Fprintf(out, "pipeline of %s failed at job %s: %s\n", j.Image, job.Meta[queue.MetaChainFailed], job.Meta[queue.MetaChainError])
		caught <- j.Image
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()

	for _, image := range []string{"cat.png", "corrupt.png"} {
		c, err := pipeline(image)
		if err != nil {
			return err
		}
		if _, err := queue.DispatchChain(ctx, q, c); err != nil {
			return err
		}
	}
	select {
	case image := <-caught:
		if image != "corrupt.png" {
			return fmt.Errorf("the catch job ran for %s", image)
		}
	case <-ctx.Done():
		return errors.New("the failing pipeline's catch job did not run in time")
	}
	// Wait for the good pipeline to publish.
	for {
		mu.Lock()
		n := len(ran)
		mu.Unlock()
		if n >= 4 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %v ran in time", ran)
		case <-time.After(20 * time.Millisecond):
		}
	}
	w.Stop()
	if err := <-errc; err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	order := map[string]int{}
	for i, r := range ran {
		order[r] = i + 1
	}
	if !(order["resized cat.png"] < order["watermarked cat.png"] && order["watermarked cat.png"] < order["published cat.png"]) || order["resized cat.png"] == 0 {
		return fmt.Errorf("cat.png's steps ran as %v", ran)
	}
	if order["resized corrupt.png"] == 0 || order["published corrupt.png"] != 0 {
		return fmt.Errorf("corrupt.png's steps ran as %v: it must be resized and never published", ran)
	}
	return nil
}
