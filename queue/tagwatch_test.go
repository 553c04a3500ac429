package queue_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestWorkerRecordsMonitoredTags: the Worker records the jobs it finishes
// that carry a monitored tag (their outcome, attempts and error), within
// about a second of the tag being monitored, and none of the others.
func TestWorkerRecordsMonitoredTags(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := memqueue.New()
		w := queue.NewWorker(q).Slog(quiet).MaxRetry(2).Backoff(time.Second)
		queue.Handle(w, func(ctx context.Context, s ShipOrder) error {
			if s.OrderID == 2 {
				return errors.New("carrier down")
			}
			return nil
		})
		stop := startWorker(t, w)
		// Before the tag is monitored: not recorded.
		early := dispatchID(t, q, ShipOrder{OrderID: 1, CustomerID: 42})
		waitFor(t, "the first job to finish", func() bool { return stateOf(t, q, early).State == queue.StateDone })
		if err := q.MonitorTag(ctx, "customer:42"); err != nil {
			t.Fatal(err)
		}
		advance(2 * time.Second) // the worker reads the monitored tags once a second
		ok := dispatchID(t, q, ShipOrder{OrderID: 3, CustomerID: 42})
		bad := dispatchID(t, q, ShipOrder{OrderID: 2, CustomerID: 42})
		other := dispatchID(t, q, ShipOrder{OrderID: 4, CustomerID: 7})
		waitFor(t, "the jobs to finish", func() bool {
			return stateOf(t, q, bad).State == queue.StateDead && stateOf(t, q, other).State == queue.StateDone
		})
		stop() // writes what is pending
		recent, err := q.TaggedJobs(ctx, "customer:42", false)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]driver.TaggedJob{}
		for _, r := range recent {
			got[r.ID] = r
		}
		if len(recent) != 2 || got[ok].State != queue.StateDone || got[bad].State != queue.StateDead ||
			got[bad].Attempts != 2 || got[bad].Error != "carrier down" || got[bad].Name != "ShipOrder" || got[bad].Queue != queue.DefaultQueue {
			t.Errorf("recorded %+v; want the done job %s and the dead job %s after 2 attempts with its error", recent, ok, bad)
		}
		failed, err := q.TaggedJobs(ctx, "customer:42", true)
		if err != nil || len(failed) != 1 || failed[0].ID != bad {
			t.Errorf("failed list = %+v, %v; want the dead job %s", failed, err, bad)
		}
	})
}
