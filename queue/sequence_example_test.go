package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// Ledger is one change to an account's balance: the changes of one
// account must apply in the order they were dispatched.
type Ledger struct {
	Account string
	Step    int
}

func ExampleSequence() {
	ctx := context.Background()
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler)).Concurrency(8).Backoff(10 * time.Millisecond)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	failed := false
	queue.Handle(w, func(ctx context.Context, l Ledger) error {
		mu.Lock()
		defer mu.Unlock()
		if l.Account == "acct-1" && l.Step == 2 && !failed {
			// The first attempt fails: the retry keeps its place, and
			// step 3 waits for it.
			failed = true
			return errors.New("ledger busy")
		}
		if l.Account == "acct-1" {
			order = append(order, fmt.Sprint("step ", l.Step))
		}
		wg.Done()
		return nil
	})
	for step := 1; step <= 4; step++ {
		for _, acct := range []string{"acct-1", "acct-2"} {
			wg.Add(1)
			if err := queue.Dispatch(ctx, q, Ledger{Account: acct, Step: step}, queue.Sequence(acct), queue.MaxAttempts(3)); err != nil {
				fmt.Println(err)
				return
			}
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	wg.Wait()
	stop()
	<-ran
	fmt.Println(order)
	// Output: [step 1 step 2 step 3 step 4]
}
