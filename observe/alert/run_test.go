package alert_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/observe/alert"
	"github.com/meridianjobs/meridian/queue"
)

func TestRunChecksEveryInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		ctx, cancel := context.WithCancel(context.Background())
		if err := queue.Dispatch(ctx, q, struct{ N int }{1}, queue.OnQueue("slow"), queue.At(time.Now().Add(-time.Hour))); err != nil {
			t.Fatal(err)
		}
		var hooks calls
		a := alert.New(q, hooks.hook, alert.WithInterval(time.Minute),
			alert.WithThresholds(alert.Threshold{Queue: "slow", MaxWait: 30 * time.Minute}))
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		synctest.Wait()
		expectOne(t, &hooks, true)
		time.Sleep(5 * time.Minute) // five more checks, no transition
		synctest.Wait()
		if got := hooks.take(); len(got) != 0 {
			t.Fatalf("hook called without a transition: %+v", got)
		}
		if _, err := q.Purge(ctx, "slow"); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, time.Minute, func() bool {
			hooks.mu.Lock()
			defer hooks.mu.Unlock()
			return len(hooks.alerts) > 0
		}, "no hook call at the check after the purge")
		synctest.Wait()
		expectOne(t, &hooks, false)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	})
}
