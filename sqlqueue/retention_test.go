package sqlqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// pruneProbe is the job of TestRetentionWithinOneMaintenanceInterval.
type pruneProbe struct{}

// TestRetentionWithinOneMaintenanceInterval checks that an idle Worker
// prunes a done job within one maintenance interval of its retention,
// although its heartbeats (which also start maintenance passes) are ten
// seconds apart: with retention and maintenance of 1 s the job is gone well
// before the next heartbeat. The bound leaves seconds of slack for a loaded
// machine.
func TestRetentionWithinOneMaintenanceInterval(t *testing.T) {
	t.Parallel()
	for d, mk := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, mk(t))
			q := s.queue(t, sqlqueue.WithRetention(time.Second, time.Hour), sqlqueue.WithMaintenance(time.Second, time.Minute))
			j, err := queue.NewJob(pruneProbe{})
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Push(t.Context(), j); err != nil {
				t.Fatal(err)
			}
			done := make(chan time.Time, 1)
			w := queue.NewWorker(q).Poll(50 * time.Millisecond)
			queue.Handle(w, func(context.Context, pruneProbe) error {
				done <- time.Now()
				return nil
			})
			ctx, stop := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			defer func() {
				stop()
				if err := <-ran; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			var handled time.Time
			select {
			case handled = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the job was not handled")
			}
			// Retention 1 s, then at most one maintenance interval (1 s),
			// plus slack; the next heartbeat is 10 s after the first.
			gone := testutil.WaitFor(7*time.Second, func() bool {
				_, err := q.GetJob(t.Context(), j.ID)
				return errors.Is(err, queue.ErrNotFound)
			})
			if !gone {
				t.Fatalf("the done job was still kept %s after its handler ran (retention 1s, maintenance 1s)", time.Since(handled).Round(time.Millisecond))
			}
		})
	}
}
