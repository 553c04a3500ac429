package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type (
	Row      struct{ N int }
	RowsDone struct{}
)

func TestMemberTransition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from driver.BatchMemberState
		o    driver.Outcome
		to   driver.BatchMemberState
		ok   bool
	}{
		{driver.MemberPending, driver.OutcomeDone, driver.MemberDone, true},
		{driver.MemberPending, driver.OutcomeFailed, driver.MemberFailed, true},
		{driver.MemberPending, driver.OutcomeCancelled, driver.MemberCancelled, true},
		{driver.MemberFailed, driver.OutcomeDone, driver.MemberDone, true}, // retried from the dead letters
		{driver.MemberFailed, driver.OutcomeFailed, driver.MemberFailed, false},
		{driver.MemberDone, driver.OutcomeDone, driver.MemberDone, false},
		{driver.MemberCancelled, driver.OutcomeDone, driver.MemberCancelled, false},
		{driver.MemberPending, driver.OutcomeRetried, driver.MemberPending, false},
		{driver.MemberPending, driver.OutcomeSnoozed, driver.MemberPending, false},
	}
	for _, tc := range tests {
		to, ok := driver.MemberTransition(tc.from, tc.o)
		if to != tc.to || ok != tc.ok {
			t.Errorf("MemberTransition(%s, %s) = %s, %v; want %s, %v", tc.from, tc.o, to, ok, tc.to, tc.ok)
		}
	}
}

func TestBatchDue(t *testing.T) {
	t.Parallel()
	type b = driver.BatchInfo
	var when = b{}.CreatedAt.AddDate(2026, 0, 0)
	tests := []struct {
		name string
		info b
		want string
	}{
		{"running", b{Total: 3, Pending: 2, Done: 1}, ""},
		{"all done", b{Total: 3, Done: 3}, "then finally"},
		{"first failure", b{Total: 3, Pending: 2, Failed: 1}, "catch"},
		{"catch came", b{Total: 3, Pending: 1, Failed: 2, CatchAt: when}, ""},
		{"finished with a failure", b{Total: 3, Done: 2, Failed: 1, CatchAt: when}, "finally"},
		{"cancelled", b{Total: 3, Done: 1, Cancelled: 2}, "finally"},
		{"retried to success after finally", b{Total: 3, Done: 3, CatchAt: when, FinishedAt: when}, "then"},
		{"all came", b{Total: 3, Done: 3, ThenAt: when, FinishedAt: when}, ""},
		{"empty", b{}, ""},
	}
	for _, tc := range tests {
		var got []string
		for _, ev := range driver.BatchDue(tc.info) {
			got = append(got, string(ev))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: BatchDue = %v, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDispatchBatchInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	row := func(n int) queue.Job {
		j, err := queue.NewJob(Row{n})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	unique := row(2)
	unique.UniqueKey = "k"
	step, err := queue.Batch{Jobs: []queue.Job{row(3)}}.Step()
	if err != nil {
		t.Fatal(err)
	}
	withStep, err := queue.Chain{Steps: []queue.Job{row(4), step}}.First()
	if err != nil {
		t.Fatal(err)
	}
	dup := row(5)
	tests := []struct {
		name string
		b    queue.Batch
	}{
		{"no jobs", queue.Batch{}},
		{"a job without a name", queue.Batch{Jobs: []queue.Job{{Payload: []byte("{}")}}}},
		{"a unique key", queue.Batch{Jobs: []queue.Job{row(1), unique}}},
		{"a batch step", queue.Batch{Jobs: []queue.Job{step}}},
		{"a chain with a batch step", queue.Batch{Jobs: []queue.Job{withStep}}},
		{"a repeated ID", queue.Batch{Jobs: []queue.Job{dup, dup}}},
		{"a long name", queue.Batch{Name: strings.Repeat("x", queue.MaxBatchName+1), Jobs: []queue.Job{row(6)}}},
		{"a callback without a name", queue.Batch{Jobs: []queue.Job{row(7)}, Then: &queue.Job{}}},
	}
	for _, tc := range tests {
		if _, err := queue.DispatchBatch(ctx, q, tc.b); !errors.Is(err, queue.ErrBatch) {
			t.Errorf("%s: DispatchBatch = %v, want ErrBatch", tc.name, err)
		}
	}
	if n, _ := q.Len(ctx, ""); n != 0 {
		t.Errorf("invalid batches stored %d jobs", n)
	}
	if _, err := queue.DispatchBatch(ctx, plainQueue{q}, queue.Batch{Jobs: []queue.Job{row(8)}}); !errors.Is(err, queue.ErrNoBatches) {
		t.Errorf("DispatchBatch on a queue without batches = %v, want ErrNoBatches", err)
	}
	if _, err := queue.AddToBatch(ctx, plainQueue{q}, "b", row(9)); !errors.Is(err, queue.ErrNoBatches) {
		t.Errorf("AddToBatch on a queue without batches = %v, want ErrNoBatches", err)
	}
	if _, err := driver.BatchLimit(driver.MaxBatchPage + 1); !errors.Is(err, queue.ErrBatch) {
		t.Errorf("BatchLimit over the cap = %v, want ErrBatch", err)
	}
}

// A batch of rows with a then callback, run by a Worker on memqueue.
func ExampleDispatchBatch() {
	ctx := context.Background()
	q := memqueue.New()
	w := queue.NewWorker(q)
	done := make(chan struct{})
	queue.Handle(w, func(ctx context.Context, r Row) error { return nil })
	queue.Handle(w, func(ctx context.Context, _ RowsDone) error {
		job, _ := queue.JobFromContext(ctx)
		b, err := q.GetBatch(ctx, job.Meta[queue.MetaBatchOf])
		if err != nil {
			return err
		}
		fmt.Printf("%s: %d of %d rows done\n", job.Meta[queue.MetaBatchEvent], b.Done, b.Total)
		close(done)
		return nil
	})
	var b queue.Batch
	for n := range 3 {
		j, _ := queue.NewJob(Row{n})
		b.Jobs = append(b.Jobs, j)
	}
	then, _ := queue.NewJob(RowsDone{})
	b.Then = &then
	if _, err := queue.DispatchBatch(ctx, q, b); err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	<-done
	stop()
	<-ran
	// Output: then: 3 of 3 rows done
}

// A chain as a batch member and a batch as a chain step (Laravel's
// chains in batches and batches in chains), run by a Worker on memqueue.
func ExampleBatch_Step() {
	ctx := context.Background()
	q := memqueue.New()
	w := queue.NewWorker(q).Concurrency(1)
	done := make(chan struct{})
	queue.Handle(w, func(ctx context.Context, r Row) error {
		fmt.Println("row", r.N)
		return nil
	})
	queue.Handle(w, func(ctx context.Context, _ RowsDone) error {
		job, _ := queue.JobFromContext(ctx)
		b, err := q.GetBatch(ctx, job.Meta[queue.MetaChainAfter])
		if err != nil {
			return err
		}
		fmt.Printf("after the batch: %d of %d members done\n", b.Done, b.Total)
		close(done)
		return nil
	})
	row := func(n int) queue.Job { j, _ := queue.NewJob(Row{n}); return j }
	// The batch's members: a chain of rows 1, 2, 3 (each a member as it
	// comes) and row 4.
	chain, _ := queue.Chain{Steps: []queue.Job{row(1), row(2), row(3)}}.First()
	step, err := queue.Batch{Jobs: []queue.Job{chain, row(4)}}.Step()
	if err != nil {
		fmt.Println(err)
		return
	}
	// The outer chain: row 0, then the batch, then RowsDone.
	last, _ := queue.NewJob(RowsDone{})
	if _, err := queue.DispatchChain(ctx, q, queue.Chain{Steps: []queue.Job{row(0), step, last}}); err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	<-done
	stop()
	<-ran
	// Unordered output:
	// row 0
	// row 1
	// row 4
	// row 2
	// row 3
	// after the batch: 4 of 4 members done
}
