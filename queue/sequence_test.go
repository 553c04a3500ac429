package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestSequenceOption checks what Sequence stores on the job, and the bad
// uses: a member for a Queue that cannot keep sequences, a batch member
// with a sequence.
func TestSequenceOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		opts    []queue.Option
		release bool
	}{
		{[]queue.Option{queue.Sequence("user:42")}, false},
		{[]queue.Option{queue.Sequence("user:42", driver.ReleaseOnDead)}, true},
	} {
		j, err := queue.NewJob(Note{1}, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if key, release := driver.SequenceOf(j); key != "user:42" || release != c.release {
			t.Errorf("SequenceOf = %q, %v; want user:42, %v", key, release, c.release)
		}
	}
	q := bareQueue{memqueue.New()}
	if err := queue.Dispatch(ctx, q, Note{1}, queue.Sequence("k")); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("Dispatch(sequence) to a store without Sequencer = %v, want ErrUnsupported", err)
	}
	if _, err := queue.DispatchMany(ctx, q, []Note{{1}, {2}}, queue.Sequence("k")); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("DispatchMany(sequence) to a store without Sequencer = %v, want ErrUnsupported", err)
	}
	if n, _ := q.Len(ctx, ""); n != 0 {
		t.Errorf("%d jobs stored by refused dispatches", n)
	}
	m, err := queue.NewJob(Note{1}, queue.Sequence("k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.DispatchBatch(ctx, memqueue.New(), queue.Batch{Jobs: []queue.Job{m}}); !errors.Is(err, queue.ErrBatch) {
		t.Errorf("DispatchBatch(a member with a sequence) = %v, want ErrBatch", err)
	}
}
