package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// Behavioural bounds, not speed claims: a wake-up through NOTIFY must come
// well before the safety poll (max), which these tests set far above it.
const (
	safetyPoll = 10 * time.Second
	wakeBound  = 2 * time.Second
)

// waitAsync runs q.Wait in a goroutine; the channel receives its result
// and how long it took.
type waitResult struct {
	err     error
	elapsed time.Duration
}

// It returns once the Wait is registered with q's listener (so a later
// push reaches it) or has returned.
func waitAsync(ctx context.Context, q *postgres.Queue, queues []string, max time.Duration) <-chan waitResult {
	done := make(chan waitResult, 1)
	var finished atomic.Bool
	before := postgres.Waiting(q)
	go func() {
		start := time.Now()
		err := q.Wait(ctx, queues, max)
		finished.Store(true)
		done <- waitResult{err, time.Since(start)}
	}()
	// A Wait that registers late is caught by the callers' own bounds.
	testutil.WaitFor(wakeBound, func() bool { return postgres.Waiting(q) > before || finished.Load() })
	return done
}

// staysWaiting fails t if done has a result within d: a Wait that must not
// return yet.
func staysWaiting(t *testing.T, done <-chan waitResult, d time.Duration, why string) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("Wait returned %v after %v %s", r.err, r.elapsed, why)
	case <-time.After(d):
	}
}

// woken fails t unless done has a nil result within wakeBound.
func woken(t *testing.T, done <-chan waitResult, what string) {
	t.Helper()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Wait after %s: %v", what, r.err)
		}
	case <-time.After(wakeBound):
		t.Fatalf("Wait was not woken within %v of %s (safety poll %v)", wakeBound, what, safetyPoll)
	}
}

// A push from another process (its own pool and listener) wakes a Wait
// on the pushed queue long before the safety poll, and not a Wait on
// another queue.
func TestWaitWakesOnPush(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	q := newQueue(t, dsn)
	other := openQueue(t, dsn, q.Table())

	onMail := waitAsync(t.Context(), q, []string{"reports", "mail"}, safetyPoll)
	onReports := waitAsync(t.Context(), q, []string{"reports"}, safetyPoll)
	staysWaiting(t, onMail, 200*time.Millisecond, "before any push")

	if err := queue.Dispatch(t.Context(), other, struct{ To string }{"a@example.com"}, queue.OnQueue("mail")); err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	woken(t, onMail, "a push to mail")
	staysWaiting(t, onReports, 200*time.Millisecond, "for a push to another queue")
}

// A job delayed by another process needs no notification at its due time:
// Wait looks the due time up and returns when it comes.
func TestWaitReturnsWhenDelayedJobIsDue(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	q := newQueue(t, dsn)
	other := openQueue(t, dsn, q.Table())
	const delay = 700 * time.Millisecond
	pushed := time.Now()
	if err := queue.Dispatch(t.Context(), other, struct{}{}, queue.Delay(delay), queue.OnQueue("later")); err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	// The push's own notification may end the first Wait early (a
	// wake-up may be spurious); after it no notification comes, so the
	// job is reserved only if a Wait returns at its due time, well within
	// the safety poll.
	for {
		woken(t, waitAsync(t.Context(), q, []string{"later"}, safetyPoll), "the delayed job's due time")
		jobs, err := q.Reserve(t.Context(), []string{"later"}, 1, time.Minute)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		if len(jobs) == 1 {
			return
		}
		if time.Since(pushed) > wakeBound+delay {
			t.Fatalf("the job delayed by %v is still not reserved %v after its push", delay, time.Since(pushed))
		}
	}
}

// A Nack through q wakes q's waiter at the retry time, without a push.
func TestWaitReturnsAtOwnRetry(t *testing.T) {
	t.Parallel()
	q := newQueue(t, testDSN(t))
	if err := queue.Dispatch(t.Context(), q, struct{}{}, queue.OnQueue("retry")); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Reserve(t.Context(), []string{"retry"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %d jobs, %v", len(jobs), err)
	}
	retryAt := time.Now().Add(300 * time.Millisecond)
	if err := testutil.Nack(t.Context(), q, jobs[0].Lease(), retryAt, "try again"); err != nil {
		t.Fatalf("Nack: %v", err)
	}
	// Wait may return early (a wake-up may be spurious); what it promises
	// is that a waiter is not left sleeping until max once the retry is
	// due. So Wait and Reserve until the job comes back, each Wait well
	// within the safety poll.
	for {
		woken(t, waitAsync(t.Context(), q, []string{"retry"}, safetyPoll), "a Nack with a retry 300ms later")
		jobs, err := q.Reserve(t.Context(), []string{"retry"}, 1, time.Minute)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		if len(jobs) == 1 {
			if time.Now().Before(retryAt) {
				t.Fatalf("the nacked job was reserved before its retry time")
			}
			return
		}
		if time.Since(retryAt) > wakeBound {
			t.Fatalf("the job nacked for %v is still not reserved at %v", retryAt, time.Now())
		}
	}
}

// A paused queue's ready jobs do not make Wait return at once (the
// caller's Reserve could not take them).
func TestWaitIgnoresPausedQueue(t *testing.T) {
	t.Parallel()
	q := newQueue(t, testDSN(t))
	if err := q.Pause(t.Context(), "held"); err != nil {
		t.Fatal(err)
	}
	if err := queue.Dispatch(t.Context(), q, struct{}{}, queue.OnQueue("held")); err != nil {
		t.Fatal(err)
	}
	// The push's own notification may still wake a Wait or two (a
	// wake-up may be spurious), but the paused job must not make every
	// Wait return at once: one of three runs to its max.
	const max = 400 * time.Millisecond
	var elapsed []time.Duration
	for range 3 {
		r := <-waitAsync(t.Context(), q, []string{"held"}, max)
		if r.err != nil {
			t.Fatalf("Wait on a paused queue: %v", r.err)
		}
		if elapsed = append(elapsed, r.elapsed); r.elapsed >= max {
			break
		}
	}
	if last := elapsed[len(elapsed)-1]; last < max {
		t.Fatalf("Waits on a paused queue with a ready job returned after %v, want one to run to max (%v)", elapsed, max)
	}
	done := waitAsync(t.Context(), q, []string{"held"}, safetyPoll)
	if err := q.Resume(t.Context(), "held"); err != nil {
		t.Fatal(err)
	}
	woken(t, done, "Resume of a queue with a ready job")
}

// The due-time lookup tells a paused queue from an empty one, so that
// pushes into a paused queue do not wake its waiters for each (the
// listener's pushedHere).
func TestNextRunAtPaused(t *testing.T) {
	t.Parallel()
	q := newQueue(t, testDSN(t))
	ctx := t.Context()
	if err := q.Pause(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if err := queue.Dispatch(ctx, q, struct{}{}, queue.OnQueue("held")); err != nil {
		t.Fatal(err)
	}
	if err := queue.Dispatch(ctx, q, struct{}{}, queue.OnQueue("open")); err != nil {
		t.Fatal(err)
	}
	got, err := postgres.NextRunAt(q, ctx, []string{"held", "open", "empty"})
	if err != nil {
		t.Fatal(err)
	}
	if got["held"] != postgres.DuePaused {
		t.Errorf("paused queue with a ready job: due %d, want DuePaused (%d)", got["held"], postgres.DuePaused)
	}
	if at := got["open"]; at <= 0 || at > time.Now().UnixMicro() {
		t.Errorf("queue with a ready job: due %d, want a time up to now", at)
	}
	if got["empty"] != 0 {
		t.Errorf("empty queue: due %d, want 0", got["empty"])
	}
}

// The due-time lookup runs on its generic plan from its first call on
// every connection: PostgreSQL's plan cache otherwise plans the first
// five calls afresh, and on most connections of a Worker's pool went on
// planning every call (run AX in docs/benchmarks-history.md).
func TestNextRunAtGenericPlan(t *testing.T) {
	t.Parallel()
	q := newQueue(t, testDSN(t))
	ctx := t.Context()
	if err := queue.Dispatch(ctx, q, struct{}{}, queue.OnQueue("planned")); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if _, err := postgres.NextRunAt(q, ctx, []string{"planned", "other"}); err != nil {
			t.Fatal(err)
		}
	}
	// Every connection of the pool at once, so each is asked.
	var conns []*pgxpool.Conn
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	var generic, custom int64
	for range q.Pool().Stat().TotalConns() {
		c, err := q.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var g, cu int64
		if err := c.QueryRow(ctx, "SELECT COALESCE(SUM(generic_plans), 0), COALESCE(SUM(custom_plans), 0) FROM pg_prepared_statements WHERE statement LIKE 'WITH RECURSIVE p(priority)%'").Scan(&g, &cu); err != nil {
			t.Fatal(err)
		}
		generic, custom = generic+g, custom+cu
	}
	if custom != 0 || generic == 0 {
		t.Errorf("the lookup ran on %d generic and %d custom plans; want generic ones only", generic, custom)
	}
}

// Jobs pushed in a pgx transaction are visible, and wake waiters, only
// when it commits; a rolled-back push leaves nothing and wakes nobody.
func TestTxCommitAndRollback(t *testing.T) {
	t.Parallel()
	q := newQueue(t, testDSN(t))
	ctx := t.Context()
	done := waitAsync(ctx, q, []string{"tx"}, safetyPoll)

	tx, err := q.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil { // the caller's own work
		t.Fatal(err)
	}
	id, dup, err := queue.Enqueue(ctx, q.Tx(tx), struct{ N int }{1}, queue.OnQueue("tx"), queue.Unique("one"))
	if err != nil || dup {
		t.Fatalf("Enqueue in tx = %v, dup %v", err, dup)
	}
	if _, dup, err := queue.Enqueue(ctx, q.Tx(tx), struct{ N int }{1}, queue.OnQueue("tx"), queue.Unique("one")); err != nil || !dup {
		t.Fatalf("second Enqueue with the key in tx = %v, dup %v; want a duplicate", err, dup)
	}
	n, err := queue.DispatchMany(ctx, q.Tx(tx), []struct{ N int }{{2}, {3}}, queue.OnQueue("tx"))
	if err != nil || n != 2 {
		t.Fatalf("DispatchMany in tx = %d, %v", n, err)
	}
	staysWaiting(t, done, 300*time.Millisecond, "before the transaction committed")
	if got, _ := q.Len(ctx, "tx"); got != 0 {
		t.Fatalf("Len before commit = %d, want 0", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	woken(t, done, "the commit")
	if got, _ := q.Len(ctx, "tx"); got != 3 {
		t.Fatalf("Len after commit = %d, want 3", got)
	}
	if info, err := q.GetJob(ctx, id); err != nil || info.Job.UniqueKey != "one" {
		t.Fatalf("GetJob(%s) = %+v, %v", id, info.Job, err)
	}

	// A rolled-back transaction, on a queue of its own so that no late
	// notification of the commit above can end the Wait.
	done = waitAsync(ctx, q, []string{"rolled"}, 600*time.Millisecond)
	tx, err = q.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.Dispatch(ctx, q.Tx(tx), struct{ N int }{4}, queue.OnQueue("rolled")); err != nil {
		t.Fatalf("Dispatch in tx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.elapsed < 600*time.Millisecond {
		t.Fatalf("Wait across a rolled-back push = %v after %v, want nil after max (600ms)", r.err, r.elapsed)
	}
	if got, _ := q.Len(ctx, "rolled"); got != 0 {
		t.Fatalf("Len after rollback = %d, want 0", got)
	}
}

// listenerPID finds the backend of q's LISTEN connection.
func listenerPID(t *testing.T, pool *pgxpool.Pool, q *postgres.Queue) int32 {
	t.Helper()
	var pid int32
	// Its last statement is the LISTEN, or a self-notification naming
	// its ping channel.
	err := pool.QueryRow(t.Context(), "SELECT pid FROM pg_stat_activity WHERE starts_with(query, $1) OR strpos(query, $2) > 0",
		"LISTEN "+pgx.Identifier{q.NotifyChannel()}.Sanitize(), postgres.PingChannel(q)).Scan(&pid)
	if err != nil {
		t.Fatalf("finding the listener's backend: %v", err)
	}
	return pid
}

// awaitHealth waits until ok(q.Health()) holds, through HealthChanged.
func awaitHealth(t *testing.T, q *postgres.Queue, what string, ok func(error) bool) error {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		changed := q.HealthChanged()
		if err := q.Health(); ok(err) {
			return err
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("Health did not become %s (now %v)", what, q.Health())
		}
	}
}

// When the server ends the LISTEN connection, Health reports it, the
// listener reconnects by itself, Health is nil again, and a later push
// still wakes a waiter.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	q := newQueue(t, dsn)
	admin := newPool(t, dsn)
	if err := q.Health(); err != nil {
		t.Fatalf("Health after New = %v, want nil", err)
	}
	pid := listenerPID(t, admin, q)
	var killed bool
	if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
	}
	down := awaitHealth(t, q, "an error", func(err error) bool { return err != nil })
	t.Logf("Health while down: %v", down)
	awaitHealth(t, q, "nil", func(err error) bool { return err == nil })
	if again := listenerPID(t, admin, q); again == pid {
		t.Fatalf("the listener's backend is still %d", pid)
	}

	done := waitAsync(t.Context(), q, []string{"after"}, safetyPoll)
	staysWaiting(t, done, 200*time.Millisecond, "before the push")
	other := openQueue(t, dsn, q.Table())
	if err := queue.Dispatch(t.Context(), other, struct{}{}, queue.OnQueue("after")); err != nil {
		t.Fatal(err)
	}
	woken(t, done, "a push after the reconnect")
}

// Close ends waiting Waits with ErrClosed and reports it in Health.
func TestCloseEndsWaits(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	q := openQueue(t, dsn, randomTable())
	done := waitAsync(t.Context(), q, nil, safetyPoll)
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case r := <-done:
		if !errors.Is(r.err, postgres.ErrClosed) {
			t.Fatalf("Wait across Close = %v, want ErrClosed", r.err)
		}
	case <-time.After(wakeBound):
		t.Fatal("Close did not end a Wait")
	}
	if err := q.Wait(t.Context(), nil, time.Second); !errors.Is(err, postgres.ErrClosed) {
		t.Fatalf("Wait after Close = %v, want ErrClosed", err)
	}
	if !errors.Is(q.Health(), postgres.ErrClosed) {
		t.Fatalf("Health after Close = %v, want ErrClosed", q.Health())
	}
}

// Config.ListenDSN opens the LISTEN connection from its own connection
// string (for pools behind PgBouncer); a bad one fails New.
func TestListenDSN(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	pool := newPool(t, dsn)
	table := randomTable()
	q, err := postgres.NewWithConfig(t.Context(), pool, postgres.Config{ListenDSN: dsn, Debounce: 5 * time.Millisecond}, sqlqueue.WithTable(table))
	if err != nil {
		t.Fatalf("NewWithConfig with ListenDSN: %v", err)
	}
	defer q.Close()
	if err := q.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer q.DropTables(context.Background())
	done := waitAsync(t.Context(), q, nil, safetyPoll)
	if err := queue.Dispatch(t.Context(), q, struct{}{}); err != nil {
		t.Fatal(err)
	}
	woken(t, done, "a push, listening through ListenDSN")

	for _, bad := range []postgres.Config{{ListenDSN: "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"}, {ListenDSN: "::not a dsn"}, {Debounce: -time.Second}} {
		if q, err := postgres.NewWithConfig(t.Context(), pool, bad); err == nil {
			q.Close()
			t.Errorf("NewWithConfig(%+v) succeeded", bad)
		}
	}
	if _, err := postgres.New(t.Context(), nil); err == nil {
		t.Error("New with a nil pool succeeded")
	}
}

// A push wakes the waiters of its own Queue at once, without its
// notification: here the listener listens on another database, where no
// notification of this one arrives, and is still woken. A push from
// another Queue (another process) cannot reach it there: the wake-up was
// the local one. The notifications for other processes still go out,
// marked with the pushing Queue's origin, at most one per debounce window.
func TestLocalPushWakesWithoutNotification(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	pool := newPool(t, dsn)
	if _, err := pool.Exec(t.Context(), "CREATE DATABASE meridian_listen_elsewhere"); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("creating a database to listen on: %v", err)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := strings.Replace(dsn, "/"+cfg.Database+"?", "/meridian_listen_elsewhere?", 1)
	if elsewhere == dsn {
		t.Fatalf("cannot name another database in %q", dsn)
	}
	const gap = 20 * time.Millisecond
	q, err := postgres.NewWithConfig(t.Context(), pool, postgres.Config{ListenDSN: elsewhere, Debounce: gap}, sqlqueue.WithTable(randomTable()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer q.DropTables(context.Background())
	other := openQueue(t, dsn, q.Table())

	done := waitAsync(t.Context(), q, []string{"local"}, safetyPoll)
	if err := queue.Dispatch(t.Context(), other, struct{}{}, queue.OnQueue("local")); err != nil {
		t.Fatal(err)
	}
	staysWaiting(t, done, 300*time.Millisecond, "for another Queue's push: its notification went to the other database")
	if err := queue.Dispatch(t.Context(), q, struct{}{}, queue.OnQueue("local")); err != nil {
		t.Fatal(err)
	}
	woken(t, done, "a push through the same Queue")

	// What other processes receive: notifications marked with an origin,
	// naming the queue, no more often than once per window.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{q.NotifyChannel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	const pushes = 200
	start := time.Now()
	for range pushes {
		if err := queue.Dispatch(t.Context(), q, struct{}{}, queue.OnQueue("local")); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	got := 0
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 10*gap)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			break // none left
		}
		queues, all, origin := hook.ParsePayload(n.Payload)
		if origin == "" || all || !slices.Equal(queues, []string{"local"}) {
			t.Errorf("notification %q: queues %q, all %v, origin %q; want the queue local from a marked origin", n.Payload, queues, all, origin)
		}
		got++
	}
	if limit := int(elapsed/gap) + 2; got < 1 || got > limit {
		t.Errorf("%d pushes in %v sent %d notifications; want 1 to %d (one per %v window)", pushes, elapsed, got, limit, gap)
	}
}
