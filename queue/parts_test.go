package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue/driver"
)

// stubQueue is a Queue whose settling and extending calls are recorded and
// answered by the test. Calls it does not expect fail the test.
type stubQueue struct {
	t  *testing.T
	mu sync.Mutex

	reserve   func(n int) ([]Job, error)
	ackMany   func([]driver.Lease) ([]driver.Lease, error)
	extend    func(driver.Lease) error
	nack      func(driver.Lease, string) error
	fail      func(driver.Lease, string) error
	acked     []driver.Lease
	nacked    []string // reasons
	snoozed   []bool   // Snooze's counted flags
	failed    []string // reasons
	extends   int
	heartbeat func() error
	beats     int
	sent      []sentBeat // every heartbeat, in order
	deregs    int
}

// sentBeat is one heartbeat a stubQueue received, and when.
type sentBeat struct {
	at   time.Time
	info driver.WorkerInfo
}

func (s *stubQueue) Push(context.Context, Job) error { s.t.Error("unexpected Push"); return nil }
func (s *stubQueue) Reserve(_ context.Context, _ []string, n int, _ time.Duration) ([]Job, error) {
	if s.reserve == nil {
		return nil, nil
	}
	return s.reserve(n)
}
func (s *stubQueue) Ack(_ context.Context, l driver.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = append(s.acked, l)
	return nil
}
func (s *stubQueue) Nack(_ context.Context, l driver.Lease, _ time.Time, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nack != nil {
		if err := s.nack(l, reason); err != nil {
			return err
		}
	}
	s.nacked = append(s.nacked, reason)
	return nil
}
func (s *stubQueue) Fail(_ context.Context, l driver.Lease, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(l, reason); err != nil {
			return err
		}
	}
	s.failed = append(s.failed, reason)
	return nil
}
func (s *stubQueue) Extend(_ context.Context, l driver.Lease, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extends++
	if s.extend != nil {
		return s.extend(l)
	}
	return nil
}
func (s *stubQueue) ReserveUnstarted(ctx context.Context, queues []string, n int, lease time.Duration) ([]Job, error) {
	return s.Reserve(ctx, queues, n, lease)
}
func (s *stubQueue) Snooze(_ context.Context, _ driver.Lease, _ time.Time, counted bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snoozed = append(s.snoozed, counted)
	return nil
}
func (s *stubQueue) ReserveStarting(ctx context.Context, queues []string, n int, lease time.Duration) ([]Job, error) {
	return s.Reserve(ctx, queues, n, lease)
}
func (s *stubQueue) PushMany(context.Context, []Job) ([]bool, error) {
	s.t.Error("unexpected PushMany")
	return nil, nil
}

// ExtendMany extends through Extend, one lease at a time, so that a test
// reads each extension.
func (s *stubQueue) ExtendMany(ctx context.Context, leases []driver.Lease, d time.Duration) ([]driver.Lease, error) {
	var lost []driver.Lease
	for _, l := range leases {
		switch err := s.Extend(ctx, l, d); {
		case errors.Is(err, ErrLeaseLost):
			lost = append(lost, l)
		case err != nil:
			return nil, err
		}
	}
	return lost, nil
}
func (s *stubQueue) ObserveRun(driver.RunRecord)                             {}
func (s *stubQueue) DeadLetters(context.Context, string, int) ([]Job, error) { return nil, nil }
func (s *stubQueue) RetryDead(context.Context, string) error                 { return nil }
func (s *stubQueue) ForgetDead(context.Context, string) error                { return nil }
func (s *stubQueue) FlushDead(context.Context, string) (int, error)          { return 0, nil }
func (s *stubQueue) Len(context.Context, string) (int, error)                { return 0, nil }
func (s *stubQueue) Purge(context.Context, string) (int, error)              { return 0, nil }

// stubAcker adds AckMany to a stubQueue.
type stubAcker struct{ *stubQueue }

func (s stubAcker) AckMany(_ context.Context, leases []driver.Lease) ([]driver.Lease, error) {
	return s.ackMany(leases)
}

func (s *stubQueue) Heartbeat(_ context.Context, w driver.WorkerInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beats++
	s.sent = append(s.sent, sentBeat{time.Now(), w})
	if s.heartbeat != nil {
		return s.heartbeat()
	}
	return nil
}
func (s *stubQueue) Deregister(context.Context, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deregs++
	return nil
}
func (s *stubQueue) Workers(context.Context) ([]driver.WorkerInfo, error) { return nil, nil }

// logBuffer is a logger whose lines the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), substr)
}

func newLog() (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

func job(id string) *Job {
	return &Job{ID: id, Name: "greet", LeaseToken: "t-" + id, Attempts: 1}
}

func noObserve(EventKind, *Job, error, time.Duration) {}

func TestPacerHoldsAheadWhatCompletesInTheHorizon(t *testing.T) {
	t.Parallel()
	p := pacer{horizon: 50 * time.Millisecond, max: 1000}
	t0 := time.Unix(0, 0)
	if got := p.ahead(t0, nil); got != 0 {
		t.Fatalf("ahead with no rate = %d, want 0", got)
	}
	p.done(100)
	// 100 jobs in 100ms is 1000/s; smoothed with the earlier 0 that is 500/s,
	// or 25 jobs in 50ms.
	if got := p.ahead(t0.Add(100*time.Millisecond), nil); got != 25 {
		t.Fatalf("ahead = %d, want 25", got)
	}
	capped := pacer{horizon: time.Second, max: 10}
	capped.ahead(t0, nil)
	capped.done(1000)
	if got := capped.ahead(t0.Add(time.Second), nil); got != 10 {
		t.Fatalf("ahead = %d, want the cap 10", got)
	}
}

// TestHeldLeasesAddAll checks that a claim's batch is held as add holds
// each job: the driver's expiry when set, else the lease from now, and
// every entry apart (one job's handler start marks only its own).
func TestHeldLeasesAddAll(t *testing.T) {
	t.Parallel()
	s := newHeldLeases()
	now := time.Now()
	a, b, c := job("a"), job("b"), job("c")
	a.LeaseExpiresAt = now.Add(10 * time.Second)
	c.LeaseExpiresAt = now.Add(50 * time.Second)
	s.addAll([]*Job{a, b, c}, time.Minute) // b: no expiry from the driver
	if n := s.len(); n != 3 {
		t.Fatalf("held %d leases, want 3", n)
	}
	due := s.due(now, time.Minute) // less than 30s left
	if len(due) != 1 || due[0] != a.Lease() {
		t.Fatalf("due = %v, want only a's lease (b expires a minute from now, c in 50 s)", due)
	}
	if due := s.due(now.Add(45*time.Second), time.Minute); len(due) != 2 {
		t.Fatalf("45 s later due = %v, want b and c (a is past its expiry: no longer extended)", due)
	}
	hd, jc := s.run(b, nil, context.Background(), time.Now())
	if !s.extended(b.Lease(), now, time.Minute, ErrLeaseLost) || !errors.Is(context.Cause(jc), ErrLeaseLost) {
		t.Fatalf("b's lost lease did not cancel its handler (cause %v)", context.Cause(jc))
	}
	if lost, _, _ := s.stop(hd, 0); !lost {
		t.Fatal("b's lease not reported lost")
	}
	if !s.anyHold([]driver.Lease{a.Lease()}, now) || !s.anyHold([]driver.Lease{c.Lease()}, now) {
		t.Fatal("b's lost lease changed a's or c's")
	}
	s.addAll(nil, time.Minute)
}

func TestHeldLeases(t *testing.T) {
	t.Parallel()
	s := newHeldLeases()
	now := time.Now()
	a, b := job("a"), job("b")
	a.LeaseExpiresAt = now.Add(10 * time.Second)
	b.LeaseExpiresAt = now.Add(50 * time.Second)
	s.add(a, time.Minute)
	s.add(b, time.Minute)

	due := s.due(now, time.Minute) // less than 30s left
	if len(due) != 1 || due[0] != a.Lease() {
		t.Fatalf("due = %v, want only a's lease", due)
	}
	if s.extended(a.Lease(), now, time.Minute, nil) {
		t.Fatal("a successful extension reported the lease lost")
	}
	if due := s.due(now, time.Minute); len(due) != 0 {
		t.Fatalf("after extension due = %v, want none", due)
	}

	hd, jc := s.run(b, nil, context.Background(), time.Now())
	if !s.extended(b.Lease(), now, time.Minute, ErrLeaseLost) || !errors.Is(context.Cause(jc), ErrLeaseLost) {
		t.Fatalf("a lost lease did not cancel its handler (cause %v)", context.Cause(jc))
	}
	if lost, _, released := s.stop(hd, 0); !lost || released {
		t.Fatalf("stop = lost %v released %v, want lost only", lost, released)
	}
	if s.anyHold([]driver.Lease{b.Lease()}, now) {
		t.Fatal("anyHold true for a lost lease")
	}
	if !s.anyHold([]driver.Lease{a.Lease(), b.Lease()}, now) {
		t.Fatal("anyHold false while a's lease holds")
	}

	hd, _ = s.run(a, nil, context.Background(), time.Now())
	if got := s.releaseRunning(); len(got) != 1 || got[0] != a.Lease() {
		t.Fatalf("releaseRunning = %v, want a's lease", got)
	}
	if lost, _, released := s.stop(hd, 0); lost || !released {
		t.Fatalf("stop after release = lost %v released %v, want released", lost, released)
	}
	if n := s.len(); n != 1 {
		t.Fatalf("len = %d, want 1 (b, lost, until settled)", n)
	}
}

func TestStreakLogsFirstFailureAndRecovery(t *testing.T) {
	t.Parallel()
	log, lines := newLog()
	s := streak{log: log, doing: "reserving jobs", level: slog.LevelError}
	s.ok()
	for range 5 {
		s.failed(errors.New("connection refused"))
	}
	s.ok()
	s.ok()
	s.failed(errors.New("again"))
	if n := lines.count("reserving jobs failed"); n != 2 {
		t.Errorf("%d failure lines for two streaks, want 2", n)
	}
	if n := lines.count("reserving jobs recovered"); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
	if n := lines.count("failures=5"); n != 1 {
		t.Errorf("recovery line does not count the 5 failures:\n%s", lines.b.String())
	}
}

func TestHaltKeepsTheFirstConfigError(t *testing.T) {
	t.Parallel()
	stops := 0
	h := &halt{stop: func() { stops++ }}
	if h.check("reserving jobs", errors.New("connection reset")) {
		t.Fatal("a transient error halted the run")
	}
	first := fmt.Errorf("sqlqueue: reserving: %w", ErrConfig)
	if !h.check("reserving jobs", first) || !h.check("acking jobs", fmt.Errorf("x: %w", ErrConfig)) {
		t.Fatal("a configuration error did not halt the run")
	}
	if stops != 1 {
		t.Errorf("stop called %d times, want once", stops)
	}
	if err := h.Err(); !errors.Is(err, first) || !strings.Contains(err.Error(), "reserving jobs") {
		t.Errorf("Err = %v, want the first error with what was being done", err)
	}
}

func newCompleter(q Queue) *completer {
	c := &completer{q: q, ctx: context.Background(), leases: newHeldLeases(), halt: &halt{stop: func() {}}, observe: noObserve, log: slog.New(slog.DiscardHandler)}
	return c
}

func TestCompleterBatchesAcksAndRetriesAFailedFlush(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		calls := 0
		var got []driver.Lease
		sq.ackMany = func(ls []driver.Lease) ([]driver.Lease, error) {
			calls++
			if calls == 1 {
				return nil, errors.New("connection reset")
			}
			got = append(got, ls...)
			return nil, nil
		}
		c := newCompleter(stubAcker{sq})
		var done []string
		c.observe = func(k EventKind, j *Job, _ error, _ time.Duration) {
			if k == EventDone {
				done = append(done, j.ID)
			}
		}
		c.start(10)
		for _, id := range []string{"a", "b", "c"} {
			j := job(id)
			j.LeaseExpiresAt = time.Now().Add(time.Minute)
			c.leases.add(j, time.Minute)
			c.ack(j, time.Now(), 0, nil)
		}
		c.close()
		if len(got) != 3 || len(done) != 3 {
			t.Fatalf("acked %v, observed done %v; want all three after the retry", got, done)
		}
		if n := c.leases.len(); n != 0 {
			t.Fatalf("%d leases still held after the flush", n)
		}
	})
}

func TestCompleterGivesUpAFlushWhenTheLeasesRunOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		sq.ackMany = func([]driver.Lease) ([]driver.Lease, error) { return nil, errors.New("connection reset") }
		c := newCompleter(stubAcker{sq})
		c.start(1)
		j := job("a")
		j.LeaseExpiresAt = time.Now().Add(time.Second)
		c.leases.add(j, time.Second)
		start := time.Now()
		c.ack(j, start, 0, nil)
		c.close()
		if el := time.Since(start); el < time.Second || el > 3*time.Second {
			t.Fatalf("flush gave up after %v, want soon after the 1s lease ran out", el)
		}
		if c.leases.len() != 0 {
			t.Fatal("a given-up flush left its lease held")
		}
	})
}

func TestCompleterFallsBackToAPlainReason(t *testing.T) {
	t.Parallel()
	sq := &stubQueue{t: t}
	reject := func(_ driver.Lease, reason string) error {
		if strings.ContainsRune(reason, 'é') {
			return errors.New("pq: invalid byte sequence for encoding")
		}
		return nil
	}
	sq.nack, sq.fail = reject, reject
	c := newCompleter(sq)
	j := job("a")
	c.nack(j, errors.New("café closed"), time.Now(), time.Now(), 0)
	c.fail(j, errors.New("café closed"), time.Now(), 0)
	if len(sq.nacked) != 1 || !strings.Contains(sq.nacked[0], "caf? closed") {
		t.Errorf("nacked with %q, want the plain fallback", sq.nacked)
	}
	if len(sq.failed) != 1 || !strings.Contains(sq.failed[0], "could not be stored") {
		t.Errorf("failed with %q, want the plain fallback", sq.failed)
	}

	// A lost lease is not a storage problem: no second try.
	tries := 0
	sq.nack = func(driver.Lease, string) error { tries++; return ErrLeaseLost }
	c.nack(j, errors.New("x"), time.Now(), time.Now(), 0)
	if tries != 1 {
		t.Errorf("Nack tried %d times on a lost lease, want 1", tries)
	}
}

func TestReason(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", maxReason) // 2 bytes each: cut mid-rune by a byte cut
	tests := []struct {
		name string
		in   string
		want func(string) bool
	}{
		{"short text kept", "boom", func(s string) bool { return s == "boom" }},
		{"NUL removed", "a\x00b", func(s string) bool { return s == "ab" }},
		{"invalid UTF-8 replaced", "a\xffb", func(s string) bool { return s == "a\uFFFDb" }},
		{"long text cut on a rune", long, func(s string) bool {
			return utf8.ValidString(s) && len(s) <= maxReason && strings.HasSuffix(s, truncatedMark)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := reason(errors.New(tt.in)); !tt.want(got) {
				t.Errorf("reason(%.40q) = %.60q", tt.in, got)
			}
		})
	}
	if p := plainReason(errors.New(strings.Repeat("\x00é", 1000))); len(p) > maxPlainReason+1 || strings.ContainsAny(p, "\x00é") {
		t.Errorf("plainReason = %.80q (%d bytes), want short printable ASCII", p, len(p))
	}
}

func TestExtenderExtendsDueLeasesAndCancelsLostOnes(t *testing.T) {
	t.Parallel()
	sq := &stubQueue{t: t}
	lostID := "b"
	sq.extend = func(l driver.Lease) error {
		if l.JobID == lostID {
			return ErrLeaseLost
		}
		return nil
	}
	x := &extender{q: sq, lease: time.Minute, ctx: context.Background(), held: newHeldLeases(), halt: &halt{stop: func() {}}, log: slog.New(slog.DiscardHandler)}
	x.fails = streak{log: x.log, doing: "extending leases"}
	now := time.Now()
	for _, id := range []string{"a", "b", "c"} {
		j := job(id)
		j.LeaseExpiresAt = now.Add(10 * time.Second)
		if id == "c" {
			j.LeaseExpiresAt = now.Add(50 * time.Second) // not due yet
		}
		x.held.add(j, time.Minute)
	}
	_, jc := x.held.run(job("b"), nil, context.Background(), time.Now())
	x.round(now)
	if sq.extends != 2 {
		t.Fatalf("%d Extend calls, want 2 (a and b are due, c is not)", sq.extends)
	}
	if cause := context.Cause(jc); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("lost lease's handler cause = %v, want ErrLeaseLost", cause)
	}
	if due := x.held.due(now, time.Minute); len(due) != 0 {
		t.Fatalf("after the round due = %v, want none", due)
	}
}

func TestExtenderStopsTheRunOnAConfigError(t *testing.T) {
	t.Parallel()
	sq := &stubQueue{t: t, extend: func(driver.Lease) error { return fmt.Errorf("no such table: %w", ErrConfig) }}
	stopped := false
	x := &extender{q: sq, lease: time.Minute, ctx: context.Background(), held: newHeldLeases(), halt: &halt{stop: func() { stopped = true }}, log: slog.New(slog.DiscardHandler)}
	a := job("a")
	a.LeaseExpiresAt = time.Now().Add(10 * time.Second)
	x.held.add(a, time.Minute)
	x.round(time.Now())
	if !stopped || !errors.Is(x.halt.Err(), ErrConfig) {
		t.Fatalf("a configuration error while extending did not stop the run (%v)", x.halt.Err())
	}
}

func TestHeartbeatBeatsThenDeregisters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		log, lines := newLog()
		fail := true
		sq.heartbeat = func() error {
			if fail {
				return errors.New("connection reset")
			}
			return nil
		}
		h := &heartbeat{reg: sq, info: driver.WorkerInfo{ID: "w1"}, every: time.Second, ctx: context.Background(), halt: &halt{stop: func() {}}, log: log}
		done := make(chan struct{})
		finished := make(chan struct{})
		go func() { h.run(done); close(finished) }()
		beats := func() int {
			sq.mu.Lock()
			defer sq.mu.Unlock()
			return sq.beats
		}
		testutil.Eventually(t, 3*time.Second, func() bool { return beats() == 3 }, "beats at 0, 1s and 2s (all failing)")
		synctest.Wait()
		sq.mu.Lock()
		fail = false
		sq.mu.Unlock()
		testutil.Eventually(t, 2*time.Second, func() bool { return beats() == 4 }, "the beat at 3s (working)")
		synctest.Wait()
		close(done)
		<-finished
		if sq.beats != 4 || sq.deregs != 1 {
			t.Fatalf("beats %d, deregisters %d; want 4 and 1", sq.beats, sq.deregs)
		}
		if lines.count("worker heartbeat failed") != 1 || lines.count("worker heartbeat recovered") != 1 {
			t.Fatalf("want one failure and one recovery line, got:\n%s", lines.b.String())
		}
	})
}

func TestFetcherReturnsOnAConfigErrorAndBacksOffOthers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		var calls []time.Time
		sq.reserve = func(int) ([]Job, error) {
			calls = append(calls, time.Now())
			if len(calls) < 4 {
				return nil, errors.New("connection refused")
			}
			return nil, fmt.Errorf("relation does not exist: %w", ErrConfig)
		}
		log, lines := newLog()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := &fetcher{q: sq, queues: []string{DefaultQueue}, lease: time.Minute, concurrency: 1, poll: time.Second, log: log,
			ctx: context.Background(), leases: newHeldLeases(), halt: &halt{stop: cancel},
			out: &handoff{}, freed: newFreed(), pace: pacer{horizon: prefetchHorizon}}
		f.run(ctx)
		if !errors.Is(f.halt.Err(), ErrConfig) {
			t.Fatalf("run ended with %v, want the configuration error", f.halt.Err())
		}
		if len(calls) != 4 {
			t.Fatalf("%d Reserve calls, want 4", len(calls))
		}
		// Backoff: 50ms, 100ms, 200ms between the failing calls.
		for i, want := range []time.Duration{50, 100, 200} {
			if got := calls[i+1].Sub(calls[i]); got != want*time.Millisecond {
				t.Errorf("wait %d = %v, want %v", i, got, want*time.Millisecond)
			}
		}
		if n := lines.count("reserving jobs failed"); n != 1 {
			t.Errorf("%d failure lines for one streak of 3, want 1", n)
		}
	})
}

func TestExecutorAbandonsAStuckHandlerWithoutAWatcher(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		c := newCompleter(sq) // not started: outcomes are recorded at once
		release := make(chan struct{})
		e := &executor{
			handlers: map[string]Handler{"greet": func(ctx context.Context, j Job) error {
				<-release // ignores ctx
				return nil
			}},
			maxAttempts: func(*Job) int { return 3 }, timeout: time.Second, grace: time.Second,
			backoff: Fixed(time.Minute), base: context.Background(), leases: c.leases, completer: c,
			abandoned: newAbandoned(1), observe: noObserve, log: slog.New(slog.DiscardHandler),
		}
		j := job("a")
		c.leases.add(j, time.Minute)
		e.execute(j, nil)
		if len(sq.nacked) != 1 || !strings.Contains(sq.nacked[0], "timed out") {
			t.Fatalf("nacked %q, want one timed-out attempt", sq.nacked)
		}
		if e.abandoned.count() != 1 || !e.abandoned.runs("a") {
			t.Fatal("the stuck handler is not counted as abandoned")
		}
		if n := watchers(); n != 0 {
			t.Fatalf("%d goroutines wait on abandoned handlers; the handler's own goroutine should be all that is left", n)
		}

		// The retry comes back while the stuck copy still runs: released,
		// not run, the attempt its claim counted given back (an uncounted
		// snooze).
		again := job("a")
		again.Attempts = 2
		c.leases.add(again, time.Minute)
		e.execute(again, nil)
		if len(sq.nacked) != 1 || len(sq.snoozed) != 1 || sq.snoozed[0] {
			t.Fatalf("nacked %q, snoozed %v; want the second copy released unrun, its attempt given back", sq.nacked, sq.snoozed)
		}

		close(release)
		synctest.Wait() // every goroutine but this one is done: nothing leaked
		if e.abandoned.count() != 0 {
			t.Fatal("a returned abandoned handler is still counted")
		}
		c.close()
	})
}

// watchers counts goroutines, in the whole process, that callAbandonable
// started, that are not a handler (which runs under safeCall) and that wait
// on a channel: the goroutine that used to wait for an abandoned handler
// to log its return.
func watchers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		// A handler's goroutine on its way out has left safeCall but never
		// waits on a channel: only a watcher does.
		if strings.Contains(header, "chan receive") && strings.Contains(g, "callAbandonable in goroutine") && !strings.Contains(g, "safeCall") {
			n++
		}
	}
	return n
}

func TestExecutorAtTheAbandonCapWaitsForTheHandler(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		c := newCompleter(sq)
		e := &executor{
			handlers: map[string]Handler{"greet": func(ctx context.Context, j Job) error {
				time.Sleep(time.Hour) // ignores ctx, returns eventually
				return nil
			}},
			maxAttempts: func(*Job) int { return 3 }, timeout: time.Second, grace: time.Second,
			backoff: Fixed(time.Minute), base: context.Background(), leases: c.leases, completer: c,
			abandoned: newAbandoned(0), observe: noObserve, log: slog.New(slog.DiscardHandler),
		}
		j := job("a")
		c.leases.add(j, time.Minute)
		start := time.Now()
		e.execute(j, nil)
		if el := time.Since(start); el != time.Hour {
			t.Fatalf("execute returned after %v, want after the handler's hour", el)
		}
		// It did its work in the end: its result counts.
		if len(sq.acked) != 1 || e.abandoned.count() != 0 {
			t.Fatalf("acked %v, abandoned %d; want the job acked and nothing abandoned", sq.acked, e.abandoned.count())
		}
	})
}

// TestToReserveIsTheFewestFinishes checks the fetcher's wake-up count: for
// every state in which it waits, as many finished jobs as toReserve says
// make it reserve, and one fewer does not.
func TestToReserveIsTheFewestFinishes(t *testing.T) {
	t.Parallel()
	waits := func(outstanding, concurrency, ahead int) bool { // the fetcher's condition in run
		want := concurrency + ahead - outstanding
		return outstanding >= concurrency && (want <= 0 || want < ahead/2)
	}
	checked := 0
	for concurrency := 1; concurrency <= 12; concurrency++ {
		for ahead := 0; ahead <= 40; ahead++ {
			for outstanding := 0; outstanding <= concurrency+ahead+3; outstanding++ {
				if !waits(outstanding, concurrency, ahead) {
					continue
				}
				checked++
				k := toReserve(outstanding, concurrency, ahead)
				if k < 1 || waits(outstanding-k, concurrency, ahead) {
					t.Fatalf("c %d, ahead %d, outstanding %d: toReserve %d, and the fetcher still waits after that many", concurrency, ahead, outstanding, k)
				}
				if k > 1 && !waits(outstanding-k+1, concurrency, ahead) {
					t.Fatalf("c %d, ahead %d, outstanding %d: toReserve %d, but %d would do", concurrency, ahead, outstanding, k, k-1)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no waiting state checked")
	}
}

// The spare handlers are the handlers less those that ran jobs, on
// average: the time they worked per second, smoothed like the rate.
func TestPacerSpareHandlers(t *testing.T) {
	t.Parallel()
	p := pacer{horizon: 50 * time.Millisecond, max: 1000}
	t0 := time.Unix(0, 0)
	var worked time.Duration
	at := func(time.Time) time.Duration { return worked }
	p.ahead(t0, at)
	if got := p.spare(10); got != 10 {
		t.Fatalf("spare with nothing run = %v, want 10", got)
	}
	// 500ms of work in 100ms: 5 handlers busy, smoothed with the earlier
	// 0 to 2.5.
	worked += 500 * time.Millisecond
	p.ahead(t0.Add(100*time.Millisecond), at)
	if got := p.spare(10); got != 7.5 {
		t.Fatalf("spare = %v, want 7.5", got)
	}
	worked += 500 * time.Millisecond
	p.ahead(t0.Add(200*time.Millisecond), at)
	if got := p.spare(10); got != 6.25 {
		t.Fatalf("spare = %v, want 6.25", got)
	}
	// Within 10ms of the last sample nothing is sampled.
	worked += time.Second
	p.ahead(t0.Add(205*time.Millisecond), at)
	if got := p.spare(10); got != 6.25 {
		t.Fatalf("spare 5ms after a sample = %v, want 6.25 still", got)
	}
}

// heldLeases.worked is the time the handlers have run: one that returned
// after 25ms, and two still running, started 30ms and 10ms before now;
// one removed while it ran (its lease lost) no longer counts. workedIn
// splits it by queue: "b" and "c" are queue q2's.
func TestHeldLeasesWorked(t *testing.T) {
	t.Parallel()
	s := newHeldLeases()
	t0 := s.epoch.Add(time.Hour)
	run := func(id string, at time.Time) *held {
		j := job(id)
		j.Queue = "q1"
		if id == "b" || id == "c" {
			j.Queue = "q2"
		}
		s.add(j, time.Minute)
		h, _ := s.run(j, nil, context.Background(), at)
		return h
	}
	run("a", t0)
	run("b", t0.Add(20*time.Millisecond))
	done := run("c", t0)
	run("d", t0)
	s.stop(done, 25*time.Millisecond)
	s.remove(driver.Lease{JobID: "d", Token: "t-d"})
	now := t0.Add(30 * time.Millisecond)
	if got := s.worked(now); got != 65*time.Millisecond {
		t.Fatalf("worked = %v, want 65ms", got)
	}
	for qn, want := range map[string]time.Duration{"q1": 30 * time.Millisecond, "q2": 35 * time.Millisecond, "none": 0} {
		if got := s.workedIn(qn, now); got != want {
			t.Errorf("workedIn(%s) = %v, want %v", qn, got, want)
		}
	}
}
