package queue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Step is a chain step of the worker tests.
type Step struct{ N int }

// TestChainOnPlainQueue runs chains on a queue with no optional ability:
// the next step and the catch job ride in the outcome's Complete.
func TestChainOnPlainQueue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		failStep int // 0: none
		wantRun  []int
	}{
		{"all succeed", 0, []int{1, 2, 3}},
		{"second fails", 2, []int{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				mq := memqueue.New()
				q := plainQueue{mq}
				var mu sync.Mutex
				var ran []int
				var caught []queue.Job
				w := queue.NewWorker(q).Slog(quiet)
				queue.Handle(w, func(ctx context.Context, s Step) error {
					mu.Lock()
					defer mu.Unlock()
					ran = append(ran, s.N)
					if s.N == tc.failStep {
						return queue.Permanent(errors.New("broken"))
					}
					return nil
				})
				queue.Handle(w, func(ctx context.Context, g Greet) error {
					j, _ := queue.JobFromContext(ctx)
					mu.Lock()
					defer mu.Unlock()
					caught = append(caught, j)
					return nil
				})
				startWorker(t, w)
				var ch queue.Chain
				for n := 1; n <= 3; n++ {
					j, err := queue.NewJob(Step{n})
					if err != nil {
						t.Fatal(err)
					}
					ch.Steps = append(ch.Steps, j)
				}
				catch, err := queue.NewJob(Greet{})
				if err != nil {
					t.Fatal(err)
				}
				ch.Catch = &catch
				if _, err := queue.DispatchChain(context.Background(), q, ch); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the chain to end", func() bool {
					n, err := q.Len(context.Background(), "")
					return err == nil && n == 0
				})
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if !slices.Equal(ran, tc.wantRun) {
					t.Errorf("ran steps %v, want %v", ran, tc.wantRun)
				}
				switch {
				case tc.failStep == 0 && len(caught) != 0:
					t.Errorf("the catch job ran %d times for a chain that succeeded", len(caught))
				case tc.failStep != 0 && len(caught) != 1:
					t.Errorf("the catch job ran %d times, want once", len(caught))
				case tc.failStep != 0 && (caught[0].Meta[queue.MetaChainFailed] != ch.Steps[tc.failStep-1].ID || !strings.Contains(caught[0].Meta[queue.MetaChainError], "broken")):
					t.Errorf("the catch job's meta %v does not name the failed step %s and its error", caught[0].Meta, ch.Steps[tc.failStep-1].ID)
				}
			})
		})
	}
}

// TestChainFirst checks the job a chain dispatches and the chains it
// refuses.
func TestChainFirst(t *testing.T) {
	t.Parallel()
	step := func(opts ...queue.Option) queue.Job {
		j, err := queue.NewJob(Step{1}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	big := step()
	big.Payload = []byte(`"` + strings.Repeat("x", driver.MaxMetaBytes) + `"`)
	dupID := step()
	tests := []struct {
		name  string
		chain queue.Chain
		ok    bool
	}{
		{"one step", queue.Chain{Steps: []queue.Job{step()}}, true},
		{"unique first step", queue.Chain{Steps: []queue.Job{step(queue.Unique("k")), step()}}, true},
		{"no steps", queue.Chain{}, false},
		{"unnamed step", queue.Chain{Steps: []queue.Job{step(), {Payload: []byte("{}")}}}, false},
		{"unique later step", queue.Chain{Steps: []queue.Job{step(), step(queue.Unique("k"))}}, false},
		{"repeated ID", queue.Chain{Steps: []queue.Job{dupID, dupID}}, false},
		{"too large for meta", queue.Chain{Steps: []queue.Job{step(), big}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first, err := tc.chain.First()
			if tc.ok != (err == nil) {
				t.Fatalf("First() = %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, queue.ErrChain) {
					t.Errorf("First() = %v, want an error matching ErrChain", err)
				}
				return
			}
			_, carries := first.Meta[queue.MetaChain]
			if carries != (len(tc.chain.Steps) > 1) {
				t.Errorf("first step carries %s: %v, want %v", queue.MetaChain, carries, len(tc.chain.Steps) > 1)
			}
		})
	}
}

// TestDispatchChainDuplicate dispatches a chain whose first step's unique
// key is held: nothing is stored, and the holder's ID comes back.
func TestDispatchChainDuplicate(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	chain := func() queue.Chain {
		var c queue.Chain
		for n := 1; n <= 2; n++ {
			var opts []queue.Option
			if n == 1 {
				opts = append(opts, queue.Unique("import:42"))
			}
			j, err := queue.NewJob(Step{n}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			c.Steps = append(c.Steps, j)
		}
		return c
	}
	first, err := queue.DispatchChain(context.Background(), q, chain())
	if err != nil {
		t.Fatal(err)
	}
	again, err := queue.DispatchChain(context.Background(), q, chain())
	if err != nil || again != first {
		t.Fatalf("second DispatchChain = %q, %v; want the first chain's ID %q, nil", again, err, first)
	}
	if n, err := q.Len(context.Background(), ""); err != nil || n != 1 {
		t.Fatalf("Len = %d, %v; want 1", n, err)
	}
}
