// Command basic is the smallest Meridian program: a typed job, a handler, a
// worker and a dispatch, on the in-memory driver.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// SendWelcomeEmail is the job: any struct that encodes as JSON. Its Go type
// name is the routing key.
type SendWelcomeEmail struct {
	UserID uint64
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	q := memqueue.New()
	w := queue.NewWorker(q).MaxRetry(3).Backoff(100 * time.Millisecond)

	done := make(chan struct{})
	queue.Handle(w, func(ctx context.Context, j SendWelcomeEmail) error {
		fmt.Println("sending welcome email to user", j.UserID)
		close(done)
		return nil
	})

	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()

	if err := queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 42}); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		log.Fatal("the job was not handled in time")
	}
	w.Stop()
	if err := <-errc; err != nil {
		log.Fatal(err)
	}
}
