package queue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// fleetWorker starts a worker over q whose Greet handler runs for d and
// counts its starts and ends; Run's error arrives on the returned channel.
func fleetWorker(q queue.Queue, d time.Duration, started, ended *atomic.Int64) (*queue.Worker, <-chan error) {
	w := queue.NewWorker(q).Slog(quiet).Concurrency(2).ShutdownTimeout(time.Minute)
	queue.Handle(w, func(ctx context.Context, _ Greet) error {
		started.Add(1)
		time.Sleep(d)
		ended.Add(1)
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	return w, errc
}

// TestWorkerFleetTerminate: a fleet terminate stops every worker running
// then, each after its running jobs finish, with ErrTerminated; none of
// their jobs is lost, and a worker started after the command keeps
// working.
func TestWorkerFleetTerminate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		ctx := context.Background()
		var started, ended atomic.Int64
		var errs []<-chan error
		for range 3 {
			_, errc := fleetWorker(q, 10*time.Second, &started, &ended)
			errs = append(errs, errc)
		}
		fill(t, q, queue.DefaultQueue, 6)
		synctest.Wait()
		if n := started.Load(); n != 6 {
			t.Fatalf("%d jobs started, want 6 (3 workers of 2)", n)
		}
		if err := q.CommandWorkers(ctx, "", driver.CommandTerminate); err != nil {
			t.Fatal(err)
		}
		fill(t, q, queue.DefaultQueue, 3) // must wait for the next workers
		for i, errc := range errs {
			if err := <-errc; !errors.Is(err, queue.ErrTerminated) {
				t.Fatalf("worker %d: Run = %v, want ErrTerminated", i, err)
			}
		}
		if s, e := started.Load(), ended.Load(); s != 6 || e != 6 {
			t.Fatalf("started %d, ended %d: want the 6 running jobs finished and no new one started", s, e)
		}
		if n := length(t, q); n != 3 {
			t.Fatalf("Len = %d, want the 3 jobs pushed after the terminate left queued", n)
		}

		w, errc := fleetWorker(q, time.Second, &started, &ended)
		waitWithin(t, time.Minute, "the new worker to run the 3 jobs", func() bool { return ended.Load() == 9 })
		w.Stop()
		if err := <-errc; err != nil {
			t.Fatalf("the worker started after the terminate: Run = %v, want nil", err)
		}
	})
}

// workerIDs returns the IDs of the registered workers.
func workerIDs(t *testing.T, q *memqueue.Queue) []string {
	t.Helper()
	ws, err := q.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

// TestWorkerFleetTerminateOne: a terminate of one worker stops it alone.
func TestWorkerFleetTerminateOne(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var started, ended atomic.Int64
		_, errA := fleetWorker(q, time.Second, &started, &ended)
		synctest.Wait()
		ids := workerIDs(t, q)
		if len(ids) != 1 {
			t.Fatalf("workers %v, want 1", ids)
		}
		wb, errB := fleetWorker(q, time.Second, &started, &ended)
		if err := q.CommandWorkers(context.Background(), ids[0], driver.CommandTerminate); err != nil {
			t.Fatal(err)
		}
		if err := <-errA; !errors.Is(err, queue.ErrTerminated) {
			t.Fatalf("Run = %v, want ErrTerminated", err)
		}
		fill(t, q, queue.DefaultQueue, 4)
		waitWithin(t, time.Minute, "the other worker to run the jobs", func() bool { return ended.Load() == 4 })
		wb.Stop()
		if err := <-errB; err != nil {
			t.Fatalf("the other worker: Run = %v", err)
		}
	})
}

// TestWorkerFleetPause: a paused fleet reserves nothing (a worker started
// while it is paused included) until continued; a worker paused on its
// own stops while the others work.
func TestWorkerFleetPause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		ctx := context.Background()
		if err := q.CommandWorkers(ctx, "", driver.CommandPause); err != nil {
			t.Fatal(err)
		}
		var started, ended atomic.Int64
		wa, errA := fleetWorker(q, time.Second, &started, &ended)
		fill(t, q, queue.DefaultQueue, 4)
		time.Sleep(time.Minute)
		if n := started.Load(); n != 0 {
			t.Fatalf("%d jobs started while the fleet was paused", n)
		}
		if err := q.CommandWorkers(ctx, "", driver.CommandContinue); err != nil {
			t.Fatal(err)
		}
		waitWithin(t, time.Minute, "the jobs after continue", func() bool { return ended.Load() == 4 })

		ida := workerIDs(t, q)[0]
		var startedB, endedB atomic.Int64
		wb, errB := fleetWorker(q, time.Second, &startedB, &endedB)
		if err := q.CommandWorkers(ctx, ida, driver.CommandPause); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // both have read their orders
		fill(t, q, queue.DefaultQueue, 20)
		waitWithin(t, time.Minute, "the other worker to run the 20 jobs", func() bool { return endedB.Load() == 20 })
		if n := started.Load(); n != 4 {
			t.Fatalf("the paused worker started %d jobs, want none beyond the first 4", n)
		}
		if err := q.CommandWorkers(ctx, ida, driver.CommandContinue); err != nil {
			t.Fatal(err)
		}
		wa.Stop()
		wb.Stop()
		for _, errc := range []<-chan error{errA, errB} {
			if err := <-errc; err != nil {
				t.Fatalf("Run = %v", err)
			}
		}
	})
}
