package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Note is the job of the group tests.
type Note struct{ N int }

// TestHandleGroup runs group handlers on a Worker: each set reaches one
// call with its members in push order; a failing handler gets the same set
// again after its backoff, and a set out of attempts is one dead letter
// holding every member; a job dispatched without Group is a set of one.
func TestHandleGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		fails     int // calls that fail before one succeeds
		maxRetry  int
		group     bool
		wantCalls int
		wantDead  int // members of the dead set
	}{
		{name: "OneSet", group: true, maxRetry: 3, wantCalls: 1},
		{name: "RetriedAsSet", group: true, fails: 2, maxRetry: 3, wantCalls: 3},
		{name: "DeadAsSet", group: true, fails: 99, maxRetry: 2, wantCalls: 2, wantDead: 3},
		{name: "WithoutGroup", maxRetry: 3, wantCalls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := memqueue.New()
				w := queue.NewWorker(q).Slog(quiet).MaxRetry(tc.maxRetry).Backoff(time.Millisecond)
				var mu sync.Mutex
				var calls [][]Note
				queue.HandleGroup(w, queue.GroupRule{Grace: time.Minute, MaxSize: 3}, func(ctx context.Context, ns []Note) error {
					mu.Lock()
					defer mu.Unlock()
					calls = append(calls, ns)
					if len(calls) <= tc.fails {
						return errors.New("digest failed")
					}
					return nil
				})
				startWorker(t, w)
				var opts []queue.Option
				if tc.group {
					opts = append(opts, queue.Group("user-42"))
				}
				for n := range 3 {
					if err := queue.Dispatch(context.Background(), q, Note{n}, opts...); err != nil {
						t.Fatal(err)
					}
				}
				waitFor(t, "the sets to finish", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(calls) >= tc.wantCalls && length(t, q) == 0
				})
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if len(calls) != tc.wantCalls {
					t.Fatalf("handler called %d times, want %d: %v", len(calls), tc.wantCalls, calls)
				}
				for _, c := range calls {
					if tc.group && !slices.Equal(c, []Note{{0}, {1}, {2}}) {
						t.Errorf("call got %v, want the set of 0, 1, 2 in push order", c)
					}
					if !tc.group && len(c) != 1 {
						t.Errorf("call got %v, want a set of one", c)
					}
				}
				dead := deadLetters(t, q)
				if tc.wantDead == 0 {
					if len(dead) != 0 {
						t.Fatalf("%d dead letters, want none", len(dead))
					}
					return
				}
				if len(dead) != 1 {
					t.Fatalf("%d dead letters, want the one set", len(dead))
				}
				var ns []Note
				if err := json.Unmarshal(dead[0].Payload, &ns); err != nil || len(ns) != tc.wantDead {
					t.Errorf("dead set holds %s (%v), want %d members", dead[0].Payload, err, tc.wantDead)
				}
				if dead[0].Meta[driver.MetaGroupOf] != "user-42" {
					t.Errorf("dead set's meta %v, want %s = user-42", dead[0].Meta, driver.MetaGroupOf)
				}
			})
		})
	}
}

// bareQueue is a Queue with none of the optional abilities.
type bareQueue struct{ queue.Queue }

// TestGroupRefused checks the bad uses of groups: a member for a Queue
// that cannot gather it, a batch member with a group, a bad rule.
func TestGroupRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memqueue.New()
	q := bareQueue{mem}
	if err := queue.Dispatch(ctx, q, Note{1}, queue.Group("g")); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("Dispatch(group) to a store without Grouper = %v, want ErrUnsupported", err)
	}
	if _, err := queue.DispatchMany(ctx, q, []Note{{1}, {2}}, queue.Group("g")); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("DispatchMany(group) to a store without Grouper = %v, want ErrUnsupported", err)
	}
	if n, _ := mem.Len(ctx, ""); n != 0 {
		t.Errorf("%d jobs stored, want none", n)
	}
	j, err := queue.NewJob(Note{1}, queue.Group("g"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.DispatchBatch(ctx, mem, queue.Batch{Jobs: []queue.Job{j}}); !errors.Is(err, queue.ErrBatch) {
		t.Errorf("DispatchBatch(member with a group) = %v, want ErrBatch", err)
	}
	for _, rule := range []queue.GroupRule{{Grace: -1}, {MaxDelay: -1}, {MaxSize: -1}, {MaxSize: driver.MaxGroupSize + 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("HandleGroup(%+v) did not panic", rule)
				}
			}()
			queue.HandleGroup(queue.NewWorker(mem), rule, func(context.Context, []Note) error { return nil })
		}()
	}
}
