package memqueue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

func ExampleNew() {
	ctx := context.Background()
	q := memqueue.New()

	_ = q.Push(ctx, queue.Job{Name: "Report", Payload: []byte(`{"day":"monday"}`)})
	_ = q.Push(ctx, queue.Job{Name: "Invoice", Payload: []byte(`{"id":7}`), Priority: 10})

	n, _ := q.Len(ctx, "")
	fmt.Println("pending:", n)
	// Output:
	// pending: 2
}

func ExampleQueue_Reserve() {
	ctx := context.Background()
	q := memqueue.New()
	_ = q.Push(ctx, queue.Job{Name: "Low", Priority: -1})
	_ = q.Push(ctx, queue.Job{Name: "Normal"})
	_ = q.Push(ctx, queue.Job{Name: "Urgent", Priority: 10})

	jobs, _ := q.Reserve(ctx, []string{queue.DefaultQueue}, 10, 30*time.Second)
	var done []driver.Completion
	for _, j := range jobs {
		fmt.Println(j.Name, "attempt", j.Attempts)
		done = append(done, driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone})
	}
	_, _, _ = q.Complete(ctx, nil, done)         // every outcome in one call
	_, errs, _ := q.Complete(ctx, nil, done[:1]) // already acked
	fmt.Println("lease lost:", errors.Is(errs[0], queue.ErrLeaseLost))
	// Output:
	// Urgent attempt 1
	// Normal attempt 1
	// Low attempt 1
	// lease lost: true
}

func ExampleQueue_Push() {
	ctx := context.Background()
	q := memqueue.New()
	welcome := queue.Job{Name: "SendWelcomeEmail", Payload: []byte(`{"user_id":42}`), UniqueKey: "welcome:42"}

	fmt.Println(q.Push(ctx, welcome))
	err := q.Push(ctx, welcome) // the key is held by the active job
	fmt.Println("duplicate:", errors.Is(err, queue.ErrDuplicate))

	later := queue.Job{Name: "Reminder", AvailableAt: time.Now().Add(time.Hour)}
	_ = q.Push(ctx, later)
	jobs, _ := q.Reserve(ctx, nil, 10, time.Minute)
	fmt.Println("reservable now:", len(jobs))
	// Output:
	// <nil>
	// duplicate: true
	// reservable now: 1
}
