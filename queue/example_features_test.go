package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// ChargeCard sets its own defaults by methods: its own queue, three
// attempts, and a backoff of one minute per failed attempt.
type ChargeCard struct{ OrderID int }

func (ChargeCard) Queue() string                     { return "billing" }
func (ChargeCard) MaxAttempts() int                  { return 3 }
func (ChargeCard) Backoff(attempt int) time.Duration { return time.Duration(attempt) * time.Minute }

func ExampleNewJob_perTypeDefaults() {
	j, _ := queue.NewJob(ChargeCard{OrderID: 1})
	fmt.Println(j.Queue, j.MaxAttempts)
	// Dispatch options override the type's.
	j, _ = queue.NewJob(ChargeCard{OrderID: 2}, queue.MaxAttempts(10))
	fmt.Println(j.Queue, j.MaxAttempts)
	// Output:
	// billing 3
	// billing 10
}

func ExampleCancelJob() {
	ctx := context.Background()
	q := memqueue.New()
	id, _, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 7}, queue.Delay(time.Hour), queue.Unique("welcome:7"))

	was, err := queue.CancelJob(ctx, q, id)
	fmt.Println(was, err)
	_, err = queue.CancelJob(ctx, q, id)
	fmt.Println(errors.Is(err, queue.ErrFinished))

	// The cancelled job freed its unique key.
	_, dup, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 7}, queue.Unique("welcome:7"))
	fmt.Println("duplicate:", dup)
	// Output:
	// scheduled <nil>
	// true
	// duplicate: false
}

func ExampleEnqueue_replace() {
	ctx := context.Background()
	q := memqueue.New()
	// Debounce: each save pushes the reindex again; only the latest waits.
	first, _, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 1}, queue.Replace("reindex"), queue.Delay(time.Minute))
	second, dup, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 2}, queue.Replace("reindex"), queue.Delay(time.Minute))
	n, _ := q.Len(ctx, "")
	_, err := q.GetJob(ctx, first)
	fmt.Println(first != second, dup, n, errors.Is(err, queue.ErrNotFound))
	// Output: true false 1 true
}

func ExampleSnooze() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	runs := 0
	queue.Handle(w, func(ctx context.Context, j SendWelcomeEmail) error {
		job, _ := queue.JobFromContext(ctx)
		runs++
		fmt.Printf("run %d: attempt %d, snoozed %d times\n", runs, job.Attempts, job.Snoozes)
		if runs == 1 {
			// Not ready yet: run again shortly, without using an attempt.
			return queue.Snooze(10 * time.Millisecond)
		}
		close(done)
		return nil
	})
	go func() { _ = w.Run(ctx) }()
	_ = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 42}, queue.MaxAttempts(1))
	<-done
	// Output:
	// run 1: attempt 1, snoozed 0 times
	// run 2: attempt 1, snoozed 1 times
}

type NightlyReport struct{}

func ExamplePeriodic() {
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler))
	queue.Handle(w, func(ctx context.Context, r NightlyReport) error { return nil })

	// Every worker process registers it; each tick is enqueued once.
	err := queue.Periodic(w, "nightly-report", queue.Cron("0 3 * * *").In(time.UTC), NightlyReport{})
	fmt.Println(err)
	err = queue.Periodic(w, "bad", queue.Cron("every day at three"), NightlyReport{})
	fmt.Println(errors.Is(err, queue.ErrConfig))
	// Output:
	// <nil>
	// true
}

func ExampleNewLeader() {
	ctx, cancel := context.WithCancel(context.Background())
	q := memqueue.New()
	elected := make(chan struct{})
	l, _ := queue.NewLeader(q, "report-scheduler",
		queue.LeaderTTL(time.Second), queue.LeaderLogger(slog.New(slog.DiscardHandler)),
		queue.OnElected(func(ctx context.Context) {
			close(elected)
			<-ctx.Done() // lead until leadership ends
		}))
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	<-elected
	fmt.Println("leading:", l.IsLeader())
	cancel()
	fmt.Println(<-done, l.IsLeader())
	// Output:
	// leading: true
	// context canceled false
}

func ExampleUniqueFor() {
	ctx := context.Background()
	q := memqueue.New()
	// At most one digest per user per hour, even once the first has run.
	_, dup1, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 5}, queue.UniqueFor("digest:5", time.Hour))
	jobs, _ := q.Reserve(ctx, []string{queue.DefaultQueue}, 1, time.Minute)
	_, _, _ = q.Complete(ctx, nil, []driver.Completion{{Lease: jobs[0].Lease(), Outcome: driver.OutcomeDone}})
	_, dup2, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 5}, queue.UniqueFor("digest:5", time.Hour))
	fmt.Println(dup1, dup2)
	// Output: false true
}

// An order is charged once: a charge that succeeded (kept done by
// retention) or died (waiting for an operator) still holds its key, so a
// second dispatch for the order is a duplicate. Once the dead letter is
// forgotten, the order may be charged again.
func ExampleUnique_byState() {
	ctx := context.Background()
	q := memqueue.New()
	once := queue.Unique("charge:7", queue.StateDone, queue.StateDead)
	id, _, _ := queue.Enqueue(ctx, q, ChargeCard{OrderID: 7}, once)
	jobs, _ := q.Reserve(ctx, []string{"billing"}, 1, time.Minute)
	_, _, _ = q.Complete(ctx, nil, []driver.Completion{{Lease: jobs[0].Lease(), Outcome: driver.OutcomeFailed, Reason: "card declined"}})
	_, dup, _ := queue.Enqueue(ctx, q, ChargeCard{OrderID: 7}, queue.Unique("charge:7"))
	fmt.Println("while dead:", dup)
	_ = q.ForgetDead(ctx, id)
	_, dup, _ = queue.Enqueue(ctx, q, ChargeCard{OrderID: 7}, once)
	fmt.Println("once forgotten:", dup)
	// Output:
	// while dead: true
	// once forgotten: false
}

func ExampleUniqueByPayload() {
	ctx := context.Background()
	q := memqueue.New()
	_, a, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 1}, queue.UniqueByPayload())
	_, b, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 1}, queue.UniqueByPayload())
	_, c, _ := queue.Enqueue(ctx, q, SendWelcomeEmail{UserID: 2}, queue.UniqueByPayload())
	fmt.Println(a, b, c)
	// Output: false true false
}

// A job type narrows its payload key to the fields that identify it:
// a second reminder for the same invoice is a duplicate whatever its
// message says, held for a day.
func ExampleUniqueByPayload_fields() {
	type RemindInvoice struct {
		InvoiceID int64  `json:"invoice_id" meridian:"unique"`
		Message   string `json:"message"`
	}
	ctx := context.Background()
	q := memqueue.New()
	day := queue.UniqueFor("", 24*time.Hour)
	_, a, _ := queue.Enqueue(ctx, q, RemindInvoice{InvoiceID: 7, Message: "due soon"}, queue.UniqueByPayload(), day)
	_, b, _ := queue.Enqueue(ctx, q, RemindInvoice{InvoiceID: 7, Message: "overdue"}, day, queue.UniqueByPayload())
	_, c, _ := queue.Enqueue(ctx, q, RemindInvoice{InvoiceID: 8, Message: "overdue"}, queue.UniqueByPayload(), day)
	fmt.Println(a, b, c)
	// Output: false true false
}

// ShipOrder derives its tags from its fields, as Horizon tags a job by the
// models it carries; an operator who monitors "customer:42" on the
// dashboard sees this customer's jobs.
type ShipOrder struct {
	OrderID    int
	CustomerID int
}

func (s ShipOrder) Tags() []string {
	return []string{fmt.Sprintf("order:%d", s.OrderID), fmt.Sprintf("customer:%d", s.CustomerID)}
}

func ExampleTagger() {
	ctx := context.Background()
	q := memqueue.New()
	// The Tags option adds to the type's tags; a tag named twice is kept once.
	id, _, err := queue.Enqueue(ctx, q, ShipOrder{OrderID: 7, CustomerID: 42}, queue.Tags("express", "customer:42"))
	if err != nil {
		fmt.Println(err)
		return
	}
	info, _ := driver.CapabilitiesOf(q).Inspector.GetJob(ctx, id)
	fmt.Println(info.Tags)
	// Output:
	// [order:7 customer:42 express]
}
