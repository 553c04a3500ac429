package queue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// inspectingAcker is a stubAcker that answers GetJob from states.
type inspectingAcker struct {
	stubAcker
	states map[string]driver.JobState // missing: ErrNotFound
}

func (s inspectingAcker) QueueStats(context.Context) ([]driver.QueueStats, error) { return nil, nil }
func (s inspectingAcker) Metrics(context.Context, time.Time) ([]driver.MetricPoint, error) {
	return nil, nil
}
func (s inspectingAcker) ListJobs(context.Context, driver.JobFilter) (driver.JobPage, error) {
	return driver.JobPage{}, nil
}
func (s inspectingAcker) Counts(context.Context) ([]driver.QueueCounts, error) { return nil, nil }
func (s inspectingAcker) DeadSince(context.Context, time.Time) (driver.Count, error) {
	return driver.Count{}, nil
}
func (s inspectingAcker) OldestReady(context.Context) (map[string]time.Time, error) {
	return nil, nil
}
func (s inspectingAcker) GetJob(_ context.Context, id string) (driver.JobInfo, error) {
	st, ok := s.states[id]
	if !ok {
		return driver.JobInfo{}, ErrNotFound
	}
	return driver.JobInfo{Job: Job{ID: id}, State: st}, nil
}

// TestCompleterRechecksAcksOfAnUnknownOutcome checks that when an ack
// flush fails in a way that may have committed (a broken connection) and
// its retry reports leases lost, the jobs the store holds as done, or no
// longer holds, count as done, not as "will run again"; a job another
// worker holds stays lost. A retry that never followed an unknown outcome
// is believed as it is.
func TestCompleterRechecksAcksOfAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	states := map[string]driver.JobState{"done": StateDone, "taken": StateRunning} // "gone": pruned
	for _, tc := range []struct {
		name     string
		firstErr error
		wantDone []string
		wantLost []string
	}{
		{"connection broke around the commit", errors.New("driver: bad connection"), []string{"done", "gone"}, []string{"taken"}},
		{"no unknown outcome", nil, nil, []string{"done", "gone", "taken"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sq := &stubQueue{t: t}
				// The acks may reach the store in one flush or several (two
				// flushers run at once): each lease's first flush fails with
				// firstErr, whichever flush that is, and every later one
				// reports it lost.
				var mu sync.Mutex
				flushed := map[string]bool{}
				sq.ackMany = func(ls []driver.Lease) ([]driver.Lease, error) {
					mu.Lock()
					defer mu.Unlock()
					first := false
					for _, l := range ls {
						first = first || !flushed[l.JobID]
						flushed[l.JobID] = true
					}
					if first && tc.firstErr != nil {
						return nil, tc.firstErr
					}
					return ls, nil
				}
				c := newCompleter(inspectingAcker{stubAcker{sq}, states})
				var done, lost []string
				c.observe = func(k EventKind, j *Job, _ error, _ time.Duration) {
					switch k {
					case EventDone:
						done = append(done, j.ID)
					case EventLeaseLost:
						lost = append(lost, j.ID)
					}
				}
				c.start(10)
				for _, id := range []string{"done", "gone", "taken"} {
					j := job(id)
					j.LeaseExpiresAt = time.Now().Add(time.Minute)
					c.leases.add(j, time.Minute)
					c.ack(j, time.Now(), 0, nil)
				}
				c.close()
				// Nor is the order of the events part of the rule.
				slices.Sort(done)
				slices.Sort(lost)
				if !slices.Equal(done, tc.wantDone) || !slices.Equal(lost, tc.wantLost) {
					t.Errorf("done %v, lost %v; want done %v, lost %v", done, lost, tc.wantDone, tc.wantLost)
				}
			})
		})
	}
}
