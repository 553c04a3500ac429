package sqlqueue_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

type waitJob struct{ N int }

// TestWaitInProcess checks the in-process wake-ups that the conformance
// suite's Waiter checks do not: a Nack for shortly later, a push for
// shortly later, RetryDead and Resume each wake a Wait whose max is far
// off, and a Worker polling every 30 s handles a job pushed through its
// Queue at once.
func TestWaitInProcess(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t)
		ctx := t.Context()
		const long = time.Minute
		woken := func(what string, act func()) {
			t.Helper()
			done := make(chan error, 1)
			go func() { done <- q.Wait(ctx, []string{"w"}, long) }()
			testutil.Eventually(t, 5*time.Second, func() bool { return sqlqueue.Waiting(q) }, "%s: Wait did not subscribe", what)
			act()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: Wait: %v", what, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s did not wake Wait", what)
			}
		}
		reserve := func() queue.Job {
			t.Helper()
			jobs, err := q.Reserve(ctx, []string{"w"}, 1, time.Minute)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("Reserve = %d, %v", len(jobs), err)
			}
			return jobs[0]
		}

		woken("a push for 200ms later", func() {
			if err := q.Push(ctx, queue.Job{Queue: "w", Name: "n", AvailableAt: time.Now().Add(200 * time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		})
		j := reserve()
		woken("a Nack for 200ms later", func() {
			if err := testutil.Nack(ctx, q, j.Lease(), time.Now().Add(200*time.Millisecond), "again"); err != nil {
				t.Fatal(err)
			}
		})
		j = reserve()
		if err := testutil.Fail(ctx, q, j.Lease(), "dead"); err != nil {
			t.Fatal(err)
		}
		woken("RetryDead", func() {
			if err := q.RetryDead(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
		})
		if err := q.Pause(ctx, "w"); err != nil {
			t.Fatal(err)
		}
		// A paused queue's ready job does not end a Wait at once (the
		// Worker would spin), but Resume does.
		woken("Resume", func() {
			if err := q.Resume(ctx, "w"); err != nil {
				t.Fatal(err)
			}
		})
		j = reserve()
		if err := testutil.Ack(ctx, q, j.Lease()); err != nil {
			t.Fatal(err)
		}

		w := queue.NewWorker(q).Queues("w").Poll(30 * time.Second).Slog(slog.New(slog.DiscardHandler))
		got := make(chan struct{}, 1)
		queue.Handle(w, func(context.Context, waitJob) error {
			got <- struct{}{}
			return nil
		})
		runCtx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(runCtx) }()
		testutil.Eventually(t, 5*time.Second, func() bool { return sqlqueue.Waiting(q) }, "the Worker did not Wait")
		if err := queue.Dispatch(ctx, q, waitJob{1}, queue.OnQueue("w")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the Worker did not handle a pushed job within 5s with a 30s Poll")
		}
		stop()
		if err := <-ran; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}
