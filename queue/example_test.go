package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

type SendWelcomeEmail struct {
	UserID uint64
}

func ExampleDispatch() {
	ctx := context.Background()
	q := memqueue.New()

	_ = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 42}, queue.OnQueue("emails"), queue.Priority(10))

	jobs, _ := q.Reserve(ctx, []string{"emails"}, 10, time.Minute)
	for _, j := range jobs {
		fmt.Println(j.Name, string(j.Payload), j.Priority, j.Attempts)
	}
	// Output: SendWelcomeEmail {"UserID":42} 10 1
}

func ExampleEnqueue() {
	ctx := context.Background()
	q := memqueue.New()

	id, dup, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 7}, queue.Unique("welcome:7"))
	again, dup2, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 7}, queue.Unique("welcome:7"))
	fmt.Println(dup, dup2, id == again)
	// Output: false true true
}

func ExampleHandle() {
	ctx, cancel := context.WithCancel(context.Background())
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler))

	done := make(chan struct{})
	queue.Handle(w, func(ctx context.Context, j SendWelcomeEmail) error {
		fmt.Println("welcome mail for user", j.UserID)
		close(done)
		return nil
	})

	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	_ = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 42})
	<-done
	cancel()
	fmt.Println("run:", <-errc)
	// Output:
	// welcome mail for user 42
	// run: <nil>
}

func ExampleWorker() {
	ctx := context.Background()
	q := memqueue.New()

	failed := make(chan struct{})
	w := queue.NewWorker(q).
		Slog(slog.New(slog.DiscardHandler)).
		MaxRetry(3).                                   // three attempts in all
		BackoffPolicy(queue.Delays(time.Millisecond)). // then a short fixed wait
		Concurrency(4).
		OnFailed(func(j queue.Job, err error) {
			fmt.Printf("dead letter %s after %d attempts: %v\n", j.Name, j.Attempts, errors.Unwrap(err))
			close(failed)
		})
	queue.Handle(w, func(ctx context.Context, j SendWelcomeEmail) error {
		return fmt.Errorf("mail server: %w", errors.New("connection refused"))
	})

	go func() { _ = w.Run(ctx) }()
	_ = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 1})
	<-failed
	w.Stop()
	// Output: dead letter SendWelcomeEmail after 3 attempts: connection refused
}
