package queuetest

import (
	"context"
	"testing"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// maxScan bounds how many jobs RequireInserted reads per state.
const maxScan = 1000

// RequireInserted finds a ready or scheduled job of type T in a real
// queue through its inspection interface (memqueue and the SQL drivers
// implement driver.Inspector) that satisfies match (nil: any) and every
// check, and returns it. It stops the test with t.Fatalf, listing the jobs
// of type T it found, when there is none. It reads at most 1,000 jobs per
// state.
func RequireInserted[T any](t testing.TB, in driver.Inspector, match func(T) bool, checks ...Check) driver.JobInfo {
	t.Helper()
	ctx := context.Background()
	var seen []queue.Job
	for _, st := range []driver.JobState{queue.StateReady, queue.StateScheduled} {
		f := driver.JobFilter{State: st, Name: queue.NameOf[T](), Limit: 500}
		for read := 0; read < maxScan; {
			page, err := in.ListJobs(ctx, f)
			if err != nil {
				t.Fatalf("queuetest: listing %s jobs: %v", st, err)
			}
			for _, ji := range page.Jobs {
				if count([]queue.Job{ji.Job}, match, checks) == 1 {
					return ji
				}
				seen = append(seen, ji.Job)
			}
			read += len(page.Jobs)
			if page.Next == "" {
				break
			}
			f.After = page.Next
		}
	}
	t.Fatalf("queuetest: no %s is ready or scheduled in the queue; of that type, %s", what(match, checks), describe(seen))
	return driver.JobInfo{}
}

// Work runs the handler that w has registered for T on v, synchronously,
// wrapped in w's middleware, as the first attempt of a job built from v and
// opts (queue.NewJob), and returns the handler's error. See
// queue.Worker.RunJob.
func Work[T any](ctx context.Context, w *queue.Worker, v T, opts ...queue.Option) error {
	j, err := queue.NewJob(v, opts...)
	if err != nil {
		return err
	}
	j.Attempts = 1
	return w.RunJob(ctx, j)
}
