package postgres

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

// testListener is a listener without a connection: the tests feed it
// notifications directly. due is what its lookup reports for every queue
// (Unix µs, 0 for none).
func testListener(debounce time.Duration, due *atomic.Int64, lookups *atomic.Int32) *listener {
	return newListener("test_ready", nil, debounce, DefaultListenCheck, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(_ context.Context, queues []string) (map[string]int64, error) {
			lookups.Add(1)
			out := make(map[string]int64)
			for _, q := range queues {
				out[q] = due.Load()
			}
			return out, nil
		})
}

// waiterLoops are goroutines that Wait on a listener again and again
// until stopped, counting the Waits that returned nil.
type waiterLoops struct {
	l       *listener
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	returns atomic.Int32
}

func newWaiterLoops(l *listener) *waiterLoops {
	ctx, cancel := context.WithCancel(context.Background())
	return &waiterLoops{l: l, ctx: ctx, cancel: cancel}
}

// start runs n more goroutines waiting on queues.
func (w *waiterLoops) start(n int, queues []string) {
	for range n {
		w.wg.Go(func() {
			for w.l.wait(w.ctx, queues, time.Hour) == nil {
				w.returns.Add(1)
			}
		})
	}
}

// stop ends every loop and reports how many times Wait returned nil.
func (w *waiterLoops) stop() int {
	w.cancel()
	w.wg.Wait()
	return int(w.returns.Load())
}

// loopWaiters starts n waiter loops on queues and returns their stop.
func loopWaiters(l *listener, n int, queues []string) func() int {
	w := newWaiterLoops(l)
	w.start(n, queues)
	return w.stop
}

// A burst of notifications wakes each waiter once at its start and once
// at the end of the debounce window, not once per notification.
func TestDebounce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var due atomic.Int64
		var lookups atomic.Int32
		const window = 200 * time.Millisecond
		l := testListener(window, &due, &lookups)
		const waiters = 5
		stop := loopWaiters(l, waiters, []string{"a"})
		synctest.Wait() // every waiter blocks
		for range 100 {
			l.notified([]string{"a"}, false)
		}
		time.Sleep(2*window + window/2)
		got := stop()
		// The first notification wakes each waiter at once, the rest of
		// the burst once at the window's end: two wake-ups each.
		if got != 2*waiters {
			t.Fatalf("a burst of 100 notifications woke %d waiters %d times; want %d (at its start and at the end of the %v window)",
				waiters, got, 2*waiters, window)
		}
	})
}

// A push through this Queue wakes as many of its queue's waiters as it
// stored jobs at once, inside the debounce window too; the waiters beyond
// that count wake as after a notification, at the window's end.
func TestLocalPushWakesAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var due atomic.Int64
		var lookups atomic.Int32
		const window = 200 * time.Millisecond
		l := testListener(window, &due, &lookups)
		loops := newWaiterLoops(l)
		start := loops.start
		expect := func(want int32, after string) {
			t.Helper()
			synctest.Wait()
			if got := loops.returns.Load(); got != want {
				t.Fatalf("after %s: waiters returned %d times, want %d", after, got, want)
			}
		}

		// One waiter, a stream of local pushes of one job each, all within
		// one window: each wakes it at once; none is left for the window's end.
		start(1, []string{"a"})
		synctest.Wait()
		for range 50 {
			l.pushedHere([]string{"a"}, []int{1})
			synctest.Wait()
		}
		expect(50, "50 local pushes of one job")
		time.Sleep(2 * window)
		expect(50, "the window's end")

		// Three more waiters on "a", one on "b", and a window already open
		// (a notification from elsewhere wakes all four at once).
		start(3, []string{"a"})
		start(1, []string{"b", "c"})
		synctest.Wait()
		l.notified([]string{"a", "b"}, false)
		expect(50+5, "a notification opening the window")
		// Two jobs in "a", one in "c": three waiters at once (two of the
		// four on "a", the one on "b", "c"); at the window's end every
		// waiter on "a" (as for a notification during the window), the
		// two left and the two already back.
		l.pushedHere([]string{"a", "c"}, []int{2, 1})
		expect(55+3, "a local push of 2 jobs in a and 1 in c inside the window")
		time.Sleep(window)
		expect(58+4, "the window's end")
		loops.stop()
	})
}

// Pushes into a queue its waiters found paused wake them as notifications
// would, once per debounce window, not once per push.
func TestLocalPushIntoPausedQueueDebounced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var due atomic.Int64
		var lookups atomic.Int32
		due.Store(duePaused)
		const window = 200 * time.Millisecond
		l := testListener(window, &due, &lookups)
		stop := loopWaiters(l, 1, []string{"a"})
		synctest.Wait() // looked "a" up: paused
		for range 50 {
			l.pushedHere([]string{"a"}, []int{1})
			synctest.Wait()
		}
		time.Sleep(2 * window)
		// The first push wakes it at once (a quiet window), the other 49 once
		// at the window's end.
		if got := stop(); got != 2 {
			t.Fatalf("50 pushes into a paused queue woke its waiter %d times, want 2 (debounced)", got)
		}
	})
}

// A notification wakes only the waiters of the queues it names; an empty
// payload (any queue) wakes all.
func TestNotificationWakesMatchingWaiters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var due atomic.Int64
		var lookups atomic.Int32
		l := testListener(time.Millisecond, &due, &lookups)
		ctx := t.Context()
		onB := make(chan error, 1)
		onAC := make(chan error, 1)
		go func() { onB <- l.wait(ctx, []string{"b"}, time.Minute) }()
		go func() { onAC <- l.wait(ctx, []string{"a", "c"}, time.Minute) }()
		synctest.Wait()
		l.notified([]string{"x", "c"}, false)
		synctest.Wait()
		select {
		case err := <-onAC:
			if err != nil {
				t.Fatalf("Wait on a, c after a notification for c: %v", err)
			}
		default:
			t.Fatal("a notification for c did not wake the waiter on a, c")
		}
		select {
		case err := <-onB:
			t.Fatalf("the waiter on b returned %v after a notification for x, c", err)
		default:
		}
		l.notified(nil, true) // within the debounce window: delivered at its end
		select {
		case <-onB:
		case <-time.After(time.Second): // before the waiter's max, a minute
			t.Fatal("a notification for any queue did not wake the waiter on b")
		}
	})
}

// reschedule makes a waiting Wait look its due time up again and return
// when it comes, long before max.
func TestRescheduleFindsEarlierDue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var due atomic.Int64
		var lookups atomic.Int32
		l := testListener(time.Millisecond, &due, &lookups)
		done := make(chan error, 1)
		go func() { done <- l.wait(t.Context(), []string{"a"}, time.Minute) }()
		synctest.Wait()
		at := time.Now().Add(200 * time.Millisecond)
		due.Store(at.UnixMicro())
		l.reschedule()
		if err := <-done; err != nil {
			t.Fatalf("Wait after a reschedule = %v, want nil", err)
		}
		if now := time.Now(); now.Before(at) || now.After(at.Add(time.Second)) {
			t.Fatalf("Wait returned at %v, want at the due time %v it learnt from reschedule (max a minute)", now, at)
		}
		if n := lookups.Load(); n != 2 {
			t.Fatalf("%d due lookups, want 2 (at the start and after the reschedule)", n)
		}
	})
}

// A job that is ready but that the caller cannot reserve (for example
// locked by another transaction) makes Wait return at once at most once
// per debounce window, so a Reserve-Wait loop does not spin.
func TestReadyJobDoesNotSpin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var due atomic.Int64
		var lookups atomic.Int32
		const window = 30 * time.Millisecond
		l := testListener(window, &due, &lookups)
		due.Store(time.Now().Add(-time.Second).UnixMicro())
		start := time.Now()
		const rounds = 10
		for range rounds {
			if err := l.wait(t.Context(), []string{"a"}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if elapsed := time.Since(start); elapsed != (rounds-1)*window {
			t.Fatalf("%d Waits with a ready job took %v, want %v (the first at once, then one per window)", rounds, elapsed, (rounds-1)*window)
		}
	})
}

// Health changes close the channel HealthChanged gave before them.
func TestHealthChanges(t *testing.T) {
	t.Parallel()
	var due atomic.Int64
	var lookups atomic.Int32
	l := testListener(time.Millisecond, &due, &lookups)
	if !errors.Is(l.getHealth(), errConnecting) {
		t.Fatalf("health before the first LISTEN = %v", l.getHealth())
	}
	changed := l.healthChanged()
	l.setHealth(nil)
	select {
	case <-changed:
	default:
		t.Fatal("the health channel was not closed by a change")
	}
	same := l.healthChanged()
	l.setHealth(nil)
	select {
	case <-same:
		t.Fatal("the health channel was closed without a change")
	default:
	}
	l.close()
	if !errors.Is(l.getHealth(), ErrClosed) {
		t.Fatalf("health after close = %v, want ErrClosed", l.getHealth())
	}
}

// A due time looked up while a notification arrived is not cached: the
// lookup may have missed the notified job.
func TestLookupRacingNotificationIsNotCached(t *testing.T) {
	t.Parallel()
	synctest.Test(t, lookupRacingNotification)
}

func lookupRacingNotification(t *testing.T) {
	var lookups atomic.Int32
	var l *listener
	l = newListener("test_ready", nil, time.Millisecond, DefaultListenCheck, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(_ context.Context, queues []string) (map[string]int64, error) {
			if lookups.Add(1) == 1 {
				l.notified([]string{"a"}, false) // arrives while the query runs
			}
			return map[string]int64{"a": 0}, nil
		})
	if err := l.wait(t.Context(), []string{"a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.wait(t.Context(), []string{"a"}, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := l.wait(t.Context(), []string{"a"}, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := lookups.Load(); n != 2 {
		t.Fatalf("%d lookups, want 2: the racing one not cached, the next one cached", n)
	}
}

// A notification this Queue's own push sent (marked with its origin) wakes
// nobody: its waiters were woken at the push. One from another origin, or
// unmarked (a push inside a caller's transaction, an older release), wakes
// the waiters on the queues it names.
func TestDeliverSkipsOwnOrigin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var due atomic.Int64
		var lookups atomic.Int32
		cases := []struct {
			name, payload string
			wakes         bool
		}{
			{"unmarked", hook.MarkPayload("", "mail"), true},
			{"own push", "", false}, // the payload: the listener's own mark, below
			{"another origin", hook.MarkPayload("0123456789abcdef", "mail"), true},
			{"another origin, another queue", hook.MarkPayload("0123456789abcdef", "reports"), false},
			{"another origin, every queue", hook.MarkPayload("0123456789abcdef", ""), true},
		}
		for _, c := range cases {
			l := testListener(time.Millisecond, &due, &lookups)
			payload := c.payload
			if c.name == "own push" {
				payload = hook.MarkPayload(l.origin, "mail")
			}
			ctx, cancel := context.WithCancel(context.Background())
			res := make(chan error, 1)
			go func() { res <- l.wait(ctx, []string{"mail"}, time.Hour) }()
			synctest.Wait()
			l.deliver(payload)
			synctest.Wait()
			select {
			case err := <-res:
				if !c.wakes || err != nil {
					t.Errorf("%s: Wait returned %v; want it to stay waiting", c.name, err)
				}
			default:
				if c.wakes {
					t.Errorf("%s (%q): Wait not woken", c.name, payload)
				}
			}
			cancel()
			synctest.Wait()
		}
	})
}
