package dag_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/meridianjobs/meridian/dag"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// Fetch, Double, Increment and Sum are the jobs of the example's graph.
type (
	Fetch     struct{ N int }
	Double    struct{}
	Increment struct{}
	Sum       struct{}
)

func Example() {
	ctx := context.Background()
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler))

	queue.Handle(w, func(ctx context.Context, j Fetch) error {
		return queue.SetResult(ctx, j.N)
	})
	queue.Handle(w, func(ctx context.Context, _ Double) error {
		n, err := dag.Result[int](ctx, q, "fetch")
		if err != nil {
			return err
		}
		return queue.SetResult(ctx, 2*n)
	})
	queue.Handle(w, func(ctx context.Context, _ Increment) error {
		n, err := dag.Result[int](ctx, q, "fetch")
		if err != nil {
			return err
		}
		return queue.SetResult(ctx, n+1)
	})
	done := make(chan struct{})
	queue.Handle(w, func(ctx context.Context, _ Sum) error {
		a, err := dag.Result[int](ctx, q, "double")
		if err != nil {
			return err
		}
		b, err := dag.Result[int](ctx, q, "increment")
		if err != nil {
			return err
		}
		fmt.Println("sum:", a+b)
		close(done)
		return nil
	})

	job := func(v any) queue.Job {
		j, err := queue.NewJob(v)
		if err != nil {
			panic(err)
		}
		return j
	}
	g := dag.New("numbers").
		Add("fetch", job(Fetch{N: 20})).
		Add("double", job(Double{}), dag.After("fetch")).        // fan-out:
		Add("increment", job(Increment{}), dag.After("fetch")).  // two nodes after one
		Add("sum", job(Sum{}), dag.After("double", "increment")) // fan-in
	id, err := dag.Dispatch(ctx, q, g)
	if err != nil {
		fmt.Println(err)
		return
	}

	run, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(run) }()
	<-done
	stop()
	<-ran // Run returns once the last ack is recorded

	info, nodes, _ := dag.Get(ctx, q, id)
	fmt.Printf("%s: %d of %d nodes done\n", info.Name, info.Done, info.Total)
	for _, n := range nodes {
		fmt.Println(n.Name, n.State, n.After)
	}
	// Output:
	// sum: 61
	// numbers: 4 of 4 nodes done
	// fetch done []
	// double done [fetch]
	// increment done [fetch]
	// sum done [double increment]
}
