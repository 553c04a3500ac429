package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// stateOf reads a job's state through the memory driver's Inspector.
func stateOf(t *testing.T, q *memqueue.Queue, id string) driver.JobInfo {
	t.Helper()
	info, err := q.GetJob(context.Background(), id)
	if err != nil {
		t.Fatalf("GetJob(%s): %v", id, err)
	}
	return info
}

// dispatchID dispatches v and returns the job's ID.
func dispatchID(t *testing.T, q queue.Queue, v any, opts ...queue.Option) string {
	t.Helper()
	j, err := queue.NewJob(v, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Push(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

func TestWorkerSnooze(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		snooze      func(time.Duration) error
		wantSnoozes int // on the second run
	}{
		{"counted", queue.Snooze, 1},
		{"uncounted", queue.SnoozeUncounted, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := memqueue.New()
				w := queue.NewWorker(q).Slog(quiet)
				var runs []time.Time
				var attempts []int
				var snoozes []int
				var mu sync.Mutex
				queue.Handle(w, func(ctx context.Context, g Greet) error {
					j, _ := queue.JobFromContext(ctx)
					mu.Lock()
					defer mu.Unlock()
					runs, attempts, snoozes = append(runs, time.Now()), append(attempts, j.Attempts), append(snoozes, j.Snoozes)
					if len(runs) == 1 {
						return tc.snooze(time.Minute)
					}
					return nil
				})
				startWorker(t, w)
				id := dispatchID(t, q, Greet{}, queue.MaxAttempts(1))
				waitWithin(t, time.Hour, "the snoozed job to run again and finish", func() bool { return stateOf(t, q, id).State == queue.StateDone })
				mu.Lock()
				defer mu.Unlock()
				if len(runs) != 2 || runs[1].Sub(runs[0]) < time.Minute {
					t.Fatalf("runs at %v, want two a minute apart", runs)
				}
				// A snooze is not an attempt: with MaxAttempts 1 the job
				// runs again, still on its first attempt. Only a counted
				// snooze goes toward Worker.MaxSnoozes.
				if attempts[1] != 1 || snoozes[1] != tc.wantSnoozes {
					t.Errorf("second run saw attempts %d, snoozes %d; want 1, %d", attempts[1], snoozes[1], tc.wantSnoozes)
				}
			})
		})
	}
}

func TestWorkerSnoozeCap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var runs atomic.Int32
		w := queue.NewWorker(q).Slog(quiet).MaxSnoozes(2).Backoff(time.Second)
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			runs.Add(1)
			return queue.Snooze(time.Second)
		})
		startWorker(t, w)
		id := dispatchID(t, q, Greet{}, queue.MaxAttempts(2))
		waitFor(t, "the job to be dead-lettered", func() bool { return stateOf(t, q, id).State == queue.StateDead })
		synctest.Wait()
		// Two snoozes within the cap, then each snooze over it is a failed
		// attempt: two attempts use up MaxAttempts 2.
		if got := runs.Load(); got != 4 {
			t.Errorf("handler ran %d times, want 4 (2 snoozes, then 2 counted attempts)", got)
		}
	})
}

func TestWorkerCancelRunningJob(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var failed atomic.Int32
		w := queue.NewWorker(q).Slog(quiet).CancelPoll(100 * time.Millisecond).OnFailed(func(queue.Job, error) { failed.Add(1) })
		started := make(chan struct{})
		cause := make(chan error, 1)
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		})
		startWorker(t, w)
		id := dispatchID(t, q, Greet{})
		<-started
		st, err := queue.CancelJob(context.Background(), q, id)
		if err != nil || st != queue.StateRunning {
			t.Fatalf("CancelJob = %v, %v; want running, nil", st, err)
		}
		if err := <-cause; !errors.Is(err, queue.ErrCancelled) {
			t.Errorf("the handler's context ended with %v, want ErrCancelled", err)
		}
		synctest.Wait()
		if info := stateOf(t, q, id); info.State != queue.StateCancelled || info.Attempts != 1 {
			t.Errorf("after cancel the job is %s with %d attempts, want cancelled with 1", info.State, info.Attempts)
		}
		if failed.Load() != 0 {
			t.Error("OnFailed ran for a cancelled job")
		}
	})
}

// TestWorkerCancelSeenByExtender checks the cause a cancelled job's
// handler sees when the extender, not the cancel watcher, learns first
// that its lease is gone (a cancel ends the lease at once): ErrCancelled,
// not ErrLeaseLost. On PostgreSQL the extender won this race in 2 of 3
// runs; here the watcher's poll comes far too late to win it.
func TestWorkerCancelSeenByExtender(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var failed atomic.Int32
		w := queue.NewWorker(q).Slog(quiet).Lease(4 * time.Second).CancelPoll(time.Hour).
			OnFailed(func(queue.Job, error) { failed.Add(1) })
		started := make(chan struct{})
		cause := make(chan error, 1)
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		})
		startWorker(t, w)
		id := dispatchID(t, q, Greet{})
		<-started
		if _, err := queue.CancelJob(context.Background(), q, id); err != nil {
			t.Fatalf("CancelJob: %v", err)
		}
		if err := <-cause; !errors.Is(err, queue.ErrCancelled) {
			t.Errorf("the handler's context ended with %v, want ErrCancelled", err)
		}
		synctest.Wait()
		if info := stateOf(t, q, id); info.State != queue.StateCancelled || info.Attempts != 1 {
			t.Errorf("after cancel the job is %s with %d attempts, want cancelled with 1", info.State, info.Attempts)
		}
		if failed.Load() != 0 {
			t.Error("OnFailed ran for a cancelled job")
		}
	})
}

func TestWorkerCancelBeforeStart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var runs atomic.Int32
		w := queue.NewWorker(q).Slog(quiet)
		queue.Handle(w, func(ctx context.Context, g Greet) error { runs.Add(1); return nil })
		id := dispatchID(t, q, Greet{}, queue.Delay(time.Hour))
		if st, err := queue.CancelJob(context.Background(), q, id); err != nil || st != queue.StateScheduled {
			t.Fatalf("CancelJob = %v, %v; want scheduled", st, err)
		}
		if _, err := queue.CancelJob(context.Background(), q, id); !errors.Is(err, queue.ErrFinished) {
			t.Errorf("a second CancelJob = %v, want ErrFinished", err)
		}
		startWorker(t, w)
		advance(2 * time.Hour)
		if runs.Load() != 0 {
			t.Error("a cancelled job ran")
		}
	})
}

func TestWorkerHandlerCancels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var runs, failed atomic.Int32
		var outcomes sync.Map
		w := queue.NewWorker(q).Slog(quiet).OnFailed(func(queue.Job, error) { failed.Add(1) }).
			Observer(queue.ObserverFunc(func(e queue.Event) {
				if e.Kind == queue.EventCancelled {
					outcomes.Store(e.Job.ID, true)
				}
			}))
		errGone := errors.New("account deleted")
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			runs.Add(1)
			return queue.Cancel(errGone)
		})
		startWorker(t, w)
		id := dispatchID(t, q, Greet{}, queue.MaxAttempts(5))
		waitFor(t, "the job to be cancelled", func() bool { return stateOf(t, q, id).State == queue.StateCancelled })
		synctest.Wait()
		if runs.Load() != 1 || failed.Load() != 0 {
			t.Errorf("handler ran %d times and OnFailed %d; want 1 and 0", runs.Load(), failed.Load())
		}
		if _, ok := outcomes.Load(id); !ok {
			t.Error("no EventCancelled observed")
		}
	})
}

func TestWorkerRetryUntil(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var runs atomic.Int32
		w := queue.NewWorker(q).Slog(quiet).Backoff(time.Minute)
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			runs.Add(1)
			return errors.New("down")
		})
		startWorker(t, w)
		id := dispatchID(t, q, Greet{}, queue.MaxAttempts(100), queue.RetryUntil(time.Now().Add(150*time.Second)))
		waitWithin(t, time.Hour, "the job to be dead-lettered", func() bool { return stateOf(t, q, id).State == queue.StateDead })
		// Attempts at 0, ~1m and ~2m are before the deadline; the one
		// after it (~3m) dead-letters.
		if got := runs.Load(); got < 3 || got > 5 {
			t.Errorf("handler ran %d times before RetryUntil, want 3 to 5", got)
		}
		if le := stateOf(t, q, id).LastError; !strings.Contains(le, "retries stopped at") || !strings.Contains(le, "down") {
			t.Errorf("the dead letter's error is %q, want it to say retries stopped and keep the handler's error", le)
		}
	})
}

// Report is a job type carrying its own options.
type Report struct{ ID int }

func (Report) Queue() string                     { return "reports" }
func (Report) MaxAttempts() int                  { return 2 }
func (Report) Timeout() time.Duration            { return 3 * time.Second }
func (Report) Backoff(attempt int) time.Duration { return time.Duration(attempt) * time.Hour }

func TestPerTypeDefaults(t *testing.T) {
	t.Parallel()
	j, err := queue.NewJob(Report{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if j.Queue != "reports" || j.MaxAttempts != 2 || j.Timeout != 3*time.Second {
		t.Errorf("NewJob(Report) = queue %q, attempts %d, timeout %s; want reports, 2, 3s", j.Queue, j.MaxAttempts, j.Timeout)
	}
	j, err = queue.NewJob(Report{}, queue.OnQueue("urgent"), queue.MaxAttempts(7))
	if err != nil {
		t.Fatal(err)
	}
	if j.Queue != "urgent" || j.MaxAttempts != 7 {
		t.Errorf("dispatch options did not override the type's: queue %q, attempts %d", j.Queue, j.MaxAttempts)
	}

	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var runs []time.Time
		var mu sync.Mutex
		w := queue.NewWorker(q).Slog(quiet).Queues("reports").Backoff(time.Millisecond)
		queue.Handle(w, func(ctx context.Context, r Report) error {
			mu.Lock()
			runs = append(runs, time.Now())
			mu.Unlock()
			return errors.New("no data yet")
		})
		startWorker(t, w)
		id := dispatchID(t, q, Report{})
		waitWithin(t, 3*time.Hour, "the report to be dead-lettered", func() bool { return stateOf(t, q, id).State == queue.StateDead })
		mu.Lock()
		defer mu.Unlock()
		// The type's MaxAttempts (2) and Backoff (1h after attempt 1)
		// override the worker's.
		if len(runs) != 2 || runs[1].Sub(runs[0]) < time.Hour {
			t.Errorf("runs at %v, want two an hour apart", runs)
		}
	})
}

func TestPeriodicEveryAcrossWorkers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		var mu sync.Mutex
		ticks := make(map[string]int)
		start := time.Now()
		for range 3 {
			w := queue.NewWorker(q).Slog(quiet)
			queue.Handle(w, func(ctx context.Context, g Greet) error {
				j, _ := queue.JobFromContext(ctx)
				mu.Lock()
				ticks[j.Meta[queue.MetaPeriodic]]++
				mu.Unlock()
				return nil
			})
			if err := queue.Periodic(w, "greet", queue.Every(time.Second), Greet{Name: "tick"}); err != nil {
				t.Fatal(err)
			}
			startWorker(t, w)
		}
		advance(10*time.Second + 500*time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		// Ticks at start+1s ... start+10s (start is on a second here).
		want := int(time.Since(start.Truncate(time.Second)) / time.Second)
		if ticks["greet"] != want {
			t.Errorf("three workers enqueued %d ticks in 10.5s of Every(1s), want exactly %d", ticks["greet"], want)
		}
	})
}

func TestPeriodicRunMissed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schedule queue.Schedule
		want     int // ticks handled in the first half second after the restart
	}{
		{"skipped", queue.Every(time.Hour), 0},
		{"run once", queue.RunMissed(queue.Every(time.Hour)), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := memqueue.New()
				var runs atomic.Int32
				newWorker := func() *queue.Worker {
					w := queue.NewWorker(q).Slog(quiet)
					queue.Handle(w, func(ctx context.Context, g Greet) error { runs.Add(1); return nil })
					if err := queue.Periodic(w, "hourly", tc.schedule, Greet{}); err != nil {
						t.Fatal(err)
					}
					return w
				}
				stop := startWorker(t, newWorker())
				synctest.Wait() // the worker idles until the first tick, an hour away
				stop()
				// Down for five hours: five ticks missed.
				advance(5 * time.Hour)
				runs.Store(0)
				startWorker(t, newWorker())
				synctest.Wait() // the restart's ticks are handled, the next is an hour away
				if got := runs.Load(); int(got) != tc.want {
					t.Errorf("after five missed ticks %d ran at restart, want %d", got, tc.want)
				}
			})
		})
	}
}

// TestPeriodicPauseAndRunByHand checks the periodic controls a tool uses
// (driver.Scheduler.PausePeriodic, driver.RunPeriodic): a paused schedule
// enqueues no tick, also after its worker restarts and registers it again,
// while a run by hand goes through with the job the worker would enqueue;
// resumed, it ticks again.
func TestPeriodicPauseAndRunByHand(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		got := make(chan queue.Job, 10)
		newWorker := func() *queue.Worker {
			w := queue.NewWorker(q).Slog(quiet)
			queue.Handle(w, func(ctx context.Context, g Greet) error {
				j, _ := queue.JobFromContext(ctx)
				got <- j
				return nil
			})
			if err := queue.Periodic(w, "hourly", queue.Every(time.Hour), Greet{Name: "periodic"}, queue.Priority(3)); err != nil {
				t.Fatal(err)
			}
			return w
		}
		stop := startWorker(t, newWorker())
		synctest.Wait()
		if err := q.PausePeriodic(t.Context(), "hourly", true); err != nil {
			t.Fatal(err)
		}
		advance(3 * time.Hour)
		stop()
		startWorker(t, newWorker()) // registers the paused schedule again
		advance(2 * time.Hour)
		if len(got) != 0 {
			t.Fatalf("a paused schedule enqueued %d ticks", len(got))
		}
		j, err := driver.RunPeriodic(t.Context(), q, "hourly")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case run := <-got:
			var g Greet
			if err := json.Unmarshal(run.Payload, &g); err != nil || g.Name != "periodic" || run.ID != j.ID || run.Priority != 3 ||
				run.Meta[queue.MetaPeriodic] != "hourly" || run.Meta[queue.MetaPeriodicTick] != "" {
				t.Errorf("the run by hand handled %+v (payload %+v, %v), want job %s of the template, meta periodic only", run, g, err, j.ID)
			}
		default:
			t.Fatal("the run by hand was not handled")
		}
		if err := q.PausePeriodic(t.Context(), "hourly", false); err != nil {
			t.Fatal(err)
		}
		advance(time.Hour)
		if len(got) != 1 {
			t.Fatalf("after the resume an hour's tick enqueued %d jobs, want 1", len(got))
		}
		if _, err := driver.RunPeriodic(t.Context(), q, "nope"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("RunPeriodic of an unknown name = %v, want ErrNotFound", err)
		}
	})
}

func TestPeriodicValidation(t *testing.T) {
	t.Parallel()
	w := queue.NewWorker(memqueue.New())
	for _, tc := range []struct {
		name string
		s    queue.Schedule
	}{
		{"sub-second Every", queue.Every(10 * time.Millisecond)},
		{"bad cron", queue.Cron("61 * * * *")},
		{"nil", nil},
	} {
		if err := queue.Periodic(w, tc.name, tc.s, Greet{}); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("Periodic(%s) = %v, want ErrConfig", tc.name, err)
		}
	}
	for _, name := range []string{"", strings.Repeat("p", driver.MaxKeyBytes+1), "nul\x00", "bad\xff"} {
		if err := queue.Periodic(w, name, queue.Every(time.Minute), Greet{}); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("Periodic named %q = %v, want ErrConfig", name, err)
		}
	}
	if err := queue.Periodic(w, strings.Repeat("p", driver.MaxKeyBytes), queue.Every(time.Minute), Greet{}); err != nil {
		t.Errorf("a periodic name of exactly MaxKeyBytes: %v", err)
	}
	if err := queue.Periodic(w, "p", queue.Cron("*/5 * * * *"), Greet{}); err != nil {
		t.Fatal(err)
	}
	if err := queue.Periodic(w, "p", queue.Every(time.Minute), Greet{}); !errors.Is(err, queue.ErrConfig) {
		t.Errorf("a second Periodic named p = %v, want ErrConfig", err)
	}
}

func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		ctxA, killA := context.WithCancel(context.Background())
		a, err := queue.NewLeader(q, "janitor", queue.LeaderHolder("a"), queue.LeaderTTL(9*time.Second), queue.LeaderRenew(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		b, err := queue.NewLeader(q, "janitor", queue.LeaderHolder("b"), queue.LeaderTTL(9*time.Second), queue.LeaderRenew(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		doneA := make(chan error, 1)
		go func() { doneA <- a.Run(ctxA) }()
		synctest.Wait()
		ctxB, stopB := context.WithCancel(context.Background())
		defer stopB()
		go func() { _ = b.Run(ctxB) }()
		advance(30 * time.Second)
		if !a.IsLeader() || b.IsLeader() {
			t.Fatalf("leaders a=%v b=%v, want only a", a.IsLeader(), b.IsLeader())
		}
		// a stops renewing; b takes over within TTL plus one renew.
		killA()
		<-doneA
		testutil.Eventually(t, 12*time.Second, b.IsLeader, "b did not take over within TTL + renew")
	})
}

// advance runs the fake clock of the test's synctest bubble d ahead, then
// waits until every goroutine of the bubble is blocked again.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}
