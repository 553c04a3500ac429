package queue

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// TestHandoffServesTheLastIdleExecutor checks that a job goes to the
// executor that went idle last, and that jobs sent while none is idle wait
// and are taken oldest first.
func TestHandoffServesTheLastIdleExecutor(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := &handoff{}
		jobs := make([]held, 6)
		for i := range jobs {
			jobs[i].job = &Job{ID: string(rune('a' + i))}
		}
		// Three executors go idle in turn: 0, then 1, then 2.
		var mu sync.Mutex
		var order []int // executors, in the order they got a job
		var got []string
		var wg sync.WaitGroup
		for e := range 3 {
			wg.Go(func() {
				in := make(chan *held, 1)
				h, ok := o.take(in, e == 1) // one waits with its stack kept: the same order
				if !ok {
					t.Errorf("executor %d: take ended before a job", e)
					return
				}
				mu.Lock()
				order = append(order, e)
				got = append(got, h.job.ID)
				mu.Unlock()
			})
			synctest.Wait() // executor e waits in take
		}
		for i := range 3 {
			o.send(&jobs[i])
			synctest.Wait() // the executor it went to has recorded it
		}
		wg.Wait()
		if want := []int{2, 1, 0}; !slices.Equal(order, want) {
			t.Errorf("executors served in the order %v, want the last idle first %v", order, want)
		}
		if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
			t.Errorf("jobs taken %v, want %v", got, want)
		}

		// None idle: jobs wait, oldest first, and survive a close until
		// taken or drained.
		for i := 3; i < 6; i++ {
			o.send(&jobs[i])
		}
		in := make(chan *held, 1)
		if h, ok := o.take(in, false); !ok || h.job.ID != "d" {
			t.Fatalf("take = %v, %v; want the oldest waiting job d", h, ok)
		}
		o.close()
		if h, ok := o.take(in, false); !ok || h.job.ID != "e" {
			t.Fatalf("take after close = %v, %v; want the waiting job e", h, ok)
		}
		left := o.drain()
		if len(left) != 1 || left[0].job.ID != "f" {
			t.Fatalf("drain = %v, want job f alone", left)
		}
		if h, ok := o.take(in, false); ok {
			t.Fatalf("take on a closed, empty handoff = %v, want none", h)
		}
	})
}

// TestHandoffCloseReleasesIdleExecutors checks that closing a handoff ends
// the takes of executors waiting for a job.
func TestHandoffCloseReleasesIdleExecutors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := &handoff{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if h, ok := o.take(make(chan *held, 1), false); ok {
					t.Errorf("take = %v after close, want none", h)
				}
			})
		}
		synctest.Wait()
		o.close()
		wg.Wait()
	})
}

// TestHandoffKeepsOrderAcrossCompaction checks that jobs waiting while
// others are taken come out in the order they were sent, however the
// buffer is reused.
func TestHandoffKeepsOrderAcrossCompaction(t *testing.T) {
	t.Parallel()
	o := &handoff{}
	in := make(chan *held, 1)
	jobs := make([]held, 1000)
	next := 0
	for i := range jobs {
		jobs[i].job = &Job{ID: string(rune(i))}
		o.send(&jobs[i])
		if i%3 == 2 { // take one for every three sent
			h, ok := o.take(in, false)
			if !ok || h != &jobs[next] {
				t.Fatalf("take %d = %v, want job %d", next, h, next)
			}
			next++
		}
	}
	for _, h := range o.drain() {
		if h != &jobs[next] {
			t.Fatalf("drained job %q, want %d", h.job.ID, next)
		}
		next++
	}
	if next != len(jobs) {
		t.Fatalf("%d jobs came out, want %d", next, len(jobs))
	}
}
