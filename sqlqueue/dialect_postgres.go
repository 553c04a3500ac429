package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jmoiron/sqlx"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
	"github.com/meridianjobs/meridian/sqlqueue/internal/migrate"
)

// vacuumDeadRows is the number of dead rows in the jobs table from which
// Maintain vacuums it on PostgreSQL.
const vacuumDeadRows = 10000

// pgDialect is PostgreSQL 12+: one-statement claims with FOR UPDATE SKIP
// LOCKED, partial indexes, RETURNING everywhere, pg_notify on push.
//
// A running job's lease expiry has a column of its own,
// lease_expires_at, apart from run_at, so that a claim changes no indexed
// column: the claim is then a HOT update (no index entry written, with
// room on the page: see the table's fillfactor). A row is claimable when
// run_at <= now and lease_expires_at <= now; lease_expires_at is 0 when the
// row holds no lease. SQLite and MySQL keep the expiry apart the same way
// (their migrations 0003 and 0004), so that an expired job keeps its place.
type pgDialect struct {
	poolPush
	searchPrunedInPlace
}

func (pgDialect) name() Dialect         { return Postgres }
func (pgDialect) quote(s string) string { return quoteDouble(s) }
func (pgDialect) maxParams() int        { return 65535 }
func (pgDialect) pushLanes() int        { return 2 }

// rebind turns ? placeholders into $1, $2 ... The SQL this package writes
// has no ? outside placeholders.
func (pgDialect) rebind(query string) string { return sqlx.Rebind(sqlx.DOLLAR, query) }

func (pgDialect) configure(DB) {}

func (pgDialect) prepare(context.Context, *Queue) error  { return nil }
func (pgDialect) prepared(context.Context, *Queue) error { return nil }

func (pgDialect) writeTx(ctx context.Context, q *Queue, fn func(ex execer) error) error {
	return dbTx(ctx, q.db, nil, fn)
}

func (pgDialect) migrations() *migrate.Dialect { return migrate.Postgres }

// reserve claims in one statement (qClaim). The rows come back in no
// order; they are sorted as claimed (priority, then the run_at they were
// claimed at, then insertion).
//
// The statement reads the claim index one priority at a time, as
// selectThenClaim does on the other stores, so that run_at <= now ends
// each range at its last due job and no job scheduled ahead is read (over
// every priority at once, ORDER BY priority DESC, run_at, seq, a claim
// that found fewer due jobs than it asked for read every scheduled entry
// of its queue: 93 ms a claim with 100,000 scheduled). The recursive CTE
// p is a loose scan of the priorities of the queues' pending jobs, one
// index seek per queue and priority, highest first; for each, the
// lateral read locks the due jobs of that priority, up to the limit. The
// executor pulls rows only until the outer LIMIT is met, so a claim that
// fills its limit from the highest priority never looks past it.
//
// The pause check is uncorrelated, so PostgreSQL runs it once as a
// One-Time Filter above the claim-index scan: correlated with the claimed
// rows (NOT EXISTS ... WHERE p.queue = j.queue), an analyzed table is
// claimed through a sequential scan, an anti join and a sort of every
// pending row, a cost that grows with the backlog.
// A claim over several queues reads the pauses first and claims only from
// the queues not paused then; the statement checks those again, so a
// queue paused in between makes this one claim return nothing.
//
// The claim returns only what it does not know (pgClaimCols) and runs
// through the Queue's direct statements when sqlqueue/postgres gave it
// some (pgx without database/sql's per-column conversions), else through
// the *sql.DB.
func (pgDialect) reserve(ctx context.Context, q *Queue, queues []string, max int, now, expires time.Time, token string, inc claimCount) ([]row, error) {
	if len(queues) > 1 {
		var err error
		if queues, err = q.unpaused(ctx, stmts(q.db), queues); err != nil || len(queues) == 0 {
			return nil, err
		}
	}
	// A claim of one queue starts after the cursor its last claim left
	// (see claimCursors); one that comes back short of max is followed by
	// a claim from the start for the rest, so that Reserve still takes
	// every claimable job it can.
	from := q.cursors.follow(queues, now)
	worker := queue.WorkerOf(ctx)
	got, err := pgClaimRows(ctx, q, queues, max, now, expires, token, inc, worker, from, nil)
	if err != nil {
		return nil, err
	}
	if from != nil && len(got) < max {
		more, err := pgClaimRows(ctx, q, queues, max-len(got), now, expires, token, inc, worker, nil, got)
		switch {
		case err == nil:
			got = more
		case len(got) == 0:
			return nil, err
		default:
			// The first claim's leases are held: hand its jobs over and
			// let the next Reserve meet the error, if it lasts.
			q.cursors.drop(queues[0])
			return pgLeasedRows(got, token, now, expires), nil
		}
	}
	q.cursors.settle(queues, max, got, from, now)
	return pgLeasedRows(got, token, now, expires), nil
}

// pgLeasedRows sorts the rows a claim leased as claimed and gives each
// what the claim set: its lease token and expiry, updated_at.
func pgLeasedRows(got []row, token string, now, expires time.Time) []row {
	slices.SortFunc(got, claimOrder)
	exp, upd := micros(expires), micros(now)
	for i := range got {
		r := &got[i]
		r.job.LeaseToken = token + "-" + strconv.FormatInt(r.seq, 10)
		r.job.LeaseExpiresAt = fromMicros(exp)
		r.runAt, r.updatedAt, r.state = exp, upd, statePending
	}
	return got
}

// pgClaimRows runs one claim statement, qClaim or, when from is not nil,
// qClaimFrom, and appends the rows it leased to got.
func pgClaimRows(ctx context.Context, q *Queue, queues []string, max int, now, expires time.Time, token string, inc claimCount, worker string, from *claimCursor, got []row) ([]row, error) {
	stmt := qClaim
	if from != nil {
		stmt = qClaimFrom
	}
	rs, err := q.reads().Query(ctx, q.stmtN(stmt, len(queues)), pgClaimArgs(queues, max, now, expires, token, inc, worker, from)...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	// Sized for a small claim and grown as rows come: max is what the
	// Worker would take (its handlers plus the prefetch, about 1,000), and
	// a claim at a low rate returns a few rows, so a slice of max rows
	// (about 400 kB) allocated and cleared per claim cost more CPU than
	// the claim's round trip.
	if got == nil {
		got = make([]row, 0, min(max, 64))
	}
	var cs claimScanner
	cs.init()
	for rs.Next() {
		r, err := cs.scan(rs)
		if err != nil {
			return nil, err
		}
		q.logDecode(r)
		got = append(got, r)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	return got, nil
}

// pgClaim is the claim statement (qClaim), with after added to the
// conditions of the rows it reads (qClaimFrom: pgClaimAfter).
func pgClaim(after string) string {
	return pgUncounted + `WITH RECURSIVE p (pr) AS (
  SELECT (SELECT MAX(h.priority) FROM (VALUES {list (CAST(? AS TEXT))}) v (name) CROSS JOIN LATERAL
    (SELECT priority FROM {jobs} WHERE state = 'pending' AND queue = v.name ORDER BY priority DESC LIMIT 1) h)
  UNION ALL
  SELECT (SELECT MAX(h.priority) FROM (VALUES {list (CAST(? AS TEXT))}) v (name) CROSS JOIN LATERAL
    (SELECT priority FROM {jobs} WHERE state = 'pending' AND queue = v.name AND priority < p.pr ORDER BY priority DESC LIMIT 1) h)
  FROM p WHERE p.pr IS NOT NULL
), c AS (
  SELECT j.id, j.run_at AS claimed_run_at, j.lease_token IS NOT NULL AS recovered FROM p CROSS JOIN LATERAL (
    SELECT id, run_at, lease_token FROM {jobs} j
    WHERE state = 'pending' AND queue IN ({list ?}) AND priority = p.pr AND run_at <= ? AND lease_expires_at <= ?` + after + `
      AND NOT EXISTS (SELECT 1 FROM {pauses} ps WHERE ps.queue IN ({list ?}))
    ORDER BY run_at, seq
    LIMIT ?
    FOR UPDATE OF j SKIP LOCKED) j
  LIMIT ?)
UPDATE {jobs} t SET attempts = t.attempts + CASE WHEN c.recovered THEN CAST(? AS INTEGER) ELSE CAST(? AS INTEGER) END, lease_token = CAST(? AS TEXT) || '-' || t.seq, lease_expires_at = ?, updated_at = ?,
  started_at = CAST(? AS BIGINT), worker = CAST(? AS TEXT)
FROM c WHERE t.id = c.id
RETURNING ` + pgClaimCols
}

// pgClaimAfter starts a claim's read of one priority after a cursor
// (priority, run_at, seq; see claimCursor): in the cursor's priority the
// read begins past the cursor's row, in the others at their start. The
// bounds depend on the priority alone, so the claim index's scan of each
// priority takes them as its start.
const pgClaimAfter = `
      AND (run_at, seq) > (CASE WHEN p.pr = CAST(? AS INTEGER) THEN CAST(? AS BIGINT) ELSE ` + pgNoBound + ` END,
        CASE WHEN p.pr = CAST(? AS INTEGER) THEN CAST(? AS BIGINT) ELSE ` + pgNoBound + ` END)`

// pgNoBound is below every run_at and seq.
const pgNoBound = "CAST('-9223372036854775808' AS BIGINT)"

// pgClaimArgs are qClaim's arguments, or qClaimFrom's when from is not
// nil.
func pgClaimArgs(queues []string, max int, now, expires time.Time, token string, inc claimCount, worker string, from *claimCursor) []any {
	names := queueArgs(queues)
	args := make([]any, 0, 4*len(names)+15)
	args = append(args, names...)
	args = append(args, names...)
	args = append(args, names...)
	args = append(args, micros(now), micros(now))
	if from != nil {
		args = append(args, from.priority, from.runAt, from.priority, from.seq)
	}
	args = append(args, names...)
	return append(args, max, max, inc.recovered, inc.fresh, token, micros(expires), micros(now), micros(now), worker)
}

// pgClaimCols are the columns a claim returns: the job as the Job type
// carries it, less what the claim itself set or knows (the lease token is
// the claim's token and the row's seq, the lease expiry and updated_at
// are the claim's, the state is pending), and the run_at the row was
// claimed at, to sort by, and whether it was taken back from an expired
// lease (queue.Job.Recovered). unique_key is read as empty when NULL, so that no
// column needs a nullable scan target.
const pgClaimCols = "t.id, t.seq, t.queue, t.name, t.payload, t.priority, t.attempts, t.max_attempts, t.timeout_us, " +
	"COALESCE(t.unique_key, ''), t.tags, t.meta, t.available_at, t.created_at, t.last_error, t.snoozes, t.retry_until, c.claimed_run_at, c.recovered"

// claimScanner reads pgClaimCols rows, reusing its scan targets for every
// row; runAt is set to the claimed run_at.
type claimScanner struct {
	f    jobFields
	dest []any
}

func (s *claimScanner) init() {
	f := &s.f
	s.dest = []any{&f.r.job.ID, &f.r.seq, &f.r.job.Queue, &f.r.job.Name, &f.r.job.Payload, &f.priority, &f.attempts, &f.maxAttempt,
		&f.timeoutUS, &f.r.job.UniqueKey, &f.tags, &f.meta, &f.avail, &f.created, &f.r.job.LastError, &f.snoozes, &f.retryUntil, &f.r.runAt, &f.r.job.Recovered}
}

func (s *claimScanner) scan(sc scanner) (row, error) {
	s.f.r = row{}
	if err := sc.Scan(s.dest...); err != nil {
		return row{}, err
	}
	r := s.f.r
	r.dueAt = r.runAt // claimed_run_at: run_at as stored
	s.f.decode(&r)
	return r, nil
}

// insertJobs inserts with ON CONFLICT DO NOTHING RETURNING id
// (qInsertJobs). With notify (a push inside the caller's transaction) the
// same statement sends the push's notification when it inserted anything
// (qInsertJobsNotify): the NULL row is the notification's.
func (pgDialect) insertJobs(ctx context.Context, q *Queue, ex statements, js []queue.Job, now time.Time, notify, held bool) (map[string]bool, bool, error) {
	args := insertArgs(js, now, held)
	plain, withNotify := qInsertJobs, qInsertJobsNotify
	if held {
		plain, withNotify = qInsertJobsHeld, qInsertJobsHeldNotify
	}
	if !notify {
		return insertReturning(ctx, ex, q.stmtN(plain, len(js)), args)
	}
	args = append(args, q.NotifyChannel(), notifyPayload(js, nil))
	return insertReturning(ctx, ex, q.stmtN(withNotify, len(js)), args)
}

// revive updates the row in place, giving it a new seq from the identity;
// the unique key is checked in the statement, so a held key skips the row
// instead of failing (which would abort the caller's transaction).
func (pgDialect) revive(ctx context.Context, q *Queue, ex statements, _ bool, j queue.Job, keepCreated bool, now time.Time) (bool, error) {
	return q.reviveInPlace(ctx, ex, j, keepCreated, now)
}

// notifyTx sends one pg_notify for a push whose jobs were stored by revive
// rather than by an INSERT that already notified.
func (pgDialect) notifyTx(ctx context.Context, q *Queue, ex statements, js []queue.Job, stored []bool) error {
	_, err := ex.Exec(ctx, q.stmt(qNotify), q.NotifyChannel(), notifyPayload(js, stored))
	return err
}

// announcer sends the notifications of pushes made outside a transaction
// (Queue.Push, Queue.PushMany) after their commit: the queues pushed to
// are collected, and one goroutine, started when there is something to
// send and gone when there is not, sends them as one pg_notify per round
// trip on a connection of its own, so pushes made meanwhile are coalesced.
//
// With a local waker (sqlqueue/postgres sets one, see hook.Queue.Local)
// the queues of each push are also handed to it at once, so a Worker of
// this process wakes without waiting for the round trip of the
// notification and its delivery; the notification is then marked with
// origin, which that listener skips, and is sent at most once per gap:
// it only wakes other processes, whose listeners debounce by about as
// much anyway. At a steady 1,000 pushes a second it was one round trip
// for every 1.5 pushes, as much client CPU as the pushes' claims.
type announcer struct {
	mu      sync.Mutex
	queues  []string
	running bool
	wg      sync.WaitGroup

	origin string
	gap    time.Duration
	wake   func(queues []string, jobs []int)
}

// announceTimeout bounds one notification round trip.
const announceTimeout = 5 * time.Second

// announce queues the notification for the stored jobs of js (all of them
// when stored is nil), and wakes this process's waiters on their queues.
func (pgDialect) announce(q *Queue, js []queue.Job, stored []bool) {
	a := &q.announcer
	var local []string
	var counts []int // jobs stored per queue of local
	a.mu.Lock()
	added := false
	for i, j := range js {
		if stored != nil && !stored[i] {
			continue
		}
		added = true
		name := j.QueueName()
		if a.wake != nil {
			if k := slices.Index(local, name); k >= 0 {
				counts[k]++
			} else {
				local, counts = append(local, name), append(counts, 1)
			}
		}
		if !slices.Contains(a.queues, name) {
			a.queues = append(a.queues, name)
		}
	}
	if added && !a.running {
		a.running = true
		a.wg.Add(1)
		go announceLoop(q)
	}
	a.mu.Unlock()
	if len(local) > 0 {
		a.wake(local, counts)
	}
}

// announceLoop sends the collected notifications until none is left. A
// notification that fails is logged and dropped: waiters still find the
// jobs at their next poll.
func announceLoop(q *Queue) {
	a := &q.announcer
	defer a.wg.Done()
	var last time.Time
	for {
		if a.gap > 0 && !last.IsZero() {
			// Pushes made until then join this notification.
			if d := time.Until(last.Add(a.gap)); d > 0 {
				time.Sleep(d)
			}
		}
		a.mu.Lock()
		queues := a.queues
		a.queues = nil
		if len(queues) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		payload := hook.MarkPayload(a.origin, strings.Join(queues, "\n"))
		if len(payload) > maxNotifyPayload {
			payload = hook.MarkPayload(a.origin, "") // every queue
		}
		last = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), announceTimeout)
		_, err := q.db.ExecContext(ctx, q.stmt(qNotify), q.NotifyChannel(), payload)
		cancel()
		if err != nil {
			q.log.Warn("sqlqueue: notifying listeners of pushed jobs; workers find them at their next poll", "table", q.t.raw, "err", err)
		}
	}
}

// finishLeases runs one statement for the parts (at most a start mark
// and an ack, pgLeaseQuery), passing the IDs and tokens of each as two
// text-array parameters (pgArray), so one statement text serves every
// batch size: each part's change is a data-modifying CTE, and the rows
// they return are told apart by the part's number.
//
// Over tables one version down (the lease_fn migration undone while this
// release runs, as a rolling downgrade does), the first statement that
// finds no leases function (SQLSTATE 42883, refused before it ran) is run
// again reading unnest, and so is every later one of q.
func (d pgDialect) finishLeases(ctx context.Context, q *Queue, parts []leaseStmt, now int64) ([]map[queue.Lease]bool, error) {
	if q.unnestLeases.Load() {
		return d.finishLeasesAs(ctx, q, parts, now, true)
	}
	out, err := d.finishLeasesAs(ctx, q, parts, now, false)
	if code, _ := pgState(err); code == pgerrcode.UndefinedFunction {
		q.unnestLeases.Store(true)
		q.log.Warn("sqlqueue: the jobs table has no leases function (schema version below 22); lease statements read unnest until Setup runs", "table", q.t.raw)
		return d.finishLeasesAs(ctx, q, parts, now, true)
	}
	return out, err
}

// finishLeasesAs is finishLeases, reading the leases through unnest
// instead of the leases function when unnest is set.
func (pgDialect) finishLeasesAs(ctx context.Context, q *Queue, parts []leaseStmt, now int64, unnest bool) ([]map[queue.Lease]bool, error) {
	text := func(id query) string {
		if unnest {
			return strings.ReplaceAll(q.stmt(id), q.d.quote(q.t.raw+"_leases_fn")+"(", "unnest(")
		}
		return q.stmt(id)
	}
	if len(parts) == 1 {
		p := parts[0]
		done := make(map[queue.Lease]bool, len(p.leases))
		err := scanLeases(ctx, q.reads(), done, text(leaseQueries[p.op].many), pgLeaseArgs(q, p.leases, now, p.args)...)
		return []map[queue.Lease]bool{done}, err
	}
	stmt, ok := pgBothLeases[[2]leaseOp{parts[0].op, parts[1].op}]
	if !ok || len(parts) > 2 {
		return nil, fmt.Errorf("sqlqueue: no statement makes %d lease changes beginning with %d and %d", len(parts), parts[0].op, parts[1].op)
	}
	var args []any
	out := make([]map[queue.Lease]bool, len(parts))
	for i, p := range parts {
		args = append(args, pgLeaseArgs(q, p.leases, now, p.args)...)
		out[i] = make(map[queue.Lease]bool, len(p.leases))
	}
	rows, err := q.reads().Query(ctx, text(stmt), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var l queue.Lease
		if err := rows.Scan(&i, &l.JobID, &l.Token); err != nil {
			return nil, err
		}
		out[i][l] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// pgBothLeases names the statements that make two changes of leases at
// once: a start mark and an ack.
var pgBothLeases = map[[2]leaseOp]query{
	{leaseStart, leaseAck}:  qStartAckLeases,
	{leaseStart, leaseDone}: qStartDoneLeases,
}

// pgLeaseArgs is arrayArgs for the statements finishLeases runs: through
// pgx itself (hook.Queue.Direct) the IDs and tokens go as []string, which
// pgx sends as binary text arrays, so neither side builds or parses an
// array literal.
func pgLeaseArgs(q *Queue, leases []queue.Lease, now int64, args []any) []any {
	if q.direct == nil {
		return arrayArgs(leases, now, args)
	}
	ids, toks := make([]string, len(leases)), make([]string, len(leases))
	for i, l := range leases {
		ids[i], toks[i] = l.JobID, l.Token
	}
	return append(slices.Clip(args), ids, toks, now)
}

// isUniqueViolation matches SQLSTATE 23505 from pgx (and any driver whose
// errors report SQLState()), or lib/pq's message.
func (pgDialect) isUniqueViolation(err error) bool {
	if code, ok := pgState(err); ok {
		return code == pgerrcode.UniqueViolation
	}
	return err != nil && strings.Contains(err.Error(), pgerrcode.UniqueViolation)
}

// isConfig matches the SQLSTATEs of a missing table or database and of
// refused credentials.
func (pgDialect) isConfig(err error) bool {
	code, _ := pgState(err)
	switch code {
	case pgerrcode.UndefinedTable, pgerrcode.InvalidCatalogName, pgerrcode.InvalidSchemaName,
		pgerrcode.InvalidPassword, pgerrcode.InvalidAuthorizationSpecification, pgerrcode.InsufficientPrivilege:
		return true
	}
	return false
}

// isConflict is a deadlock or a serialization failure, each of which
// aborts the whole transaction.
func (pgDialect) isConflict(err error) bool {
	code, _ := pgState(err)
	return code == pgerrcode.DeadlockDetected || code == pgerrcode.SerializationFailure
}

// pgState is the SQLSTATE of err from a driver whose errors report one
// (pgx's *pgconn.PgError, lib/pq's *pq.Error).
func pgState(err error) (string, bool) {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState(), true
	}
	return "", false
}

// inspectRead runs the reads in one read-only transaction under
// plan_cache_mode = force_custom_plan: a driver that prepares its
// statements (pgx caches them) would otherwise get a generic plan after
// five runs, and a generic plan cannot know that "run_at > $1" selects a
// few future jobs, so it scans the whole table. A timeout is also a
// statement timeout.
//
// A listing reads each queue's jobs in seq order from (state, queue, seq),
// never a sort of them all: with a table not yet analyzed (after a bulk
// load) the planner takes every index range as small and sorted a
// whole claim-index range of ready jobs.
func (pgDialect) inspectRead(ctx context.Context, q *Queue, timeout time.Duration, listing bool, fn func(st statements) error) error {
	tx, err := q.readDB().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	// jit off: a plan that must sort (the merge of per-queue scans under
	// enable_sort = off) costs more than jit_above_cost, and compiling it
	// took far longer than the query itself.
	set := []string{"SET LOCAL plan_cache_mode = force_custom_plan", "SET LOCAL jit = off"}
	if timeout > 0 {
		set = append(set, "SET LOCAL statement_timeout = "+strconv.Itoa(int(timeout/time.Millisecond)))
	}
	if listing {
		set = append(set, "SET LOCAL enable_sort = off")
	}
	for _, s := range set {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	if err := fn(stmts(tx)); err != nil {
		return err
	}
	return tx.Commit()
}

func (pgDialect) priorities(ctx context.Context, q *Queue, st statements, names []string) (map[string][]int64, error) {
	return q.prioritiesEach(ctx, st, names)
}

func (pgDialect) pendingCond(s queue.JobState, now int64) (string, []any) {
	return expiryPendingCond(s, now)
}

// runningList reads the head of the claim order whole: the claim index
// does not hold the lease expiry.
func (pgDialect) runningList(_ context.Context, q *Queue, _ statements, queueName string, now int64, scan int, _ int64, cond string, args []any, order string, n, i int) (string, []any, error) {
	return "SELECT * FROM (SELECT " + jobCols + " FROM (" + runningHead(q.t.jobs, jobCols) + ") h WHERE " + cond + " ORDER BY " + order + " LIMIT ?) b" + strconv.Itoa(i),
		append(append([]any{queueName, now, scan}, args...), n), nil
}

func (pgDialect) contains(col string, blob bool) string {
	if blob {
		return "position(CAST(? AS BYTEA) in " + col + ") > 0"
	}
	return "strpos(" + col + ", CAST(? AS TEXT)) > 0"
}

// listFrom is the jobs table: the planner finds the index of the order
// from the cursor's bounds.
func (pgDialect) listFrom(t tableNames, _ listOrder) string { return t.jobs }

// vacuumIfDue vacuums the jobs table when its statistics count at least
// the dead rows bar asks (vacuumDeadRows; after a walk, see
// vacuumAfterWalk, fewer on a small table): on a server with autovacuum
// off, nothing else would, and claims would walk ever more dead index
// entries. Claims are HOT updates, but acks delete rows whose index
// entries stay at the head of the claim index until a vacuum removes them.
//
// It analyzes the table too when no analyze (its own or autovacuum's) ran
// in the last analyzeEvery: the planner's figures of a queue table go stale
// quickly, but the claim and ack plans hold in every state of them (see
// finishLeases and reserve), and an ANALYZE with every vacuum, every
// 100,000 acks, costs a burn-down more than stale figures do.
func (pgDialect) vacuumIfDue(ctx context.Context, q *Queue, bar vacuumBar) error {
	var due, analyze bool
	err := queryRow(ctx, stmts(q.db), q.stmt(qVacuumDue), []any{bar.dead, bar.perLive, analyzeEvery.Seconds(), q.t.jobs}, &due, &analyze)
	if err != nil || !due {
		return err
	}
	// One process at a time: SKIP_LOCKED makes the others' checks (after
	// their own acks, or their maintenance passes) skip the table while one
	// vacuums it, rather than queue behind its lock. It needs no session
	// state, so it works through a transaction-mode pooler too.
	vacuum := qVacuum
	if analyze {
		vacuum = qVacuumAnalyze
	}
	_, err = q.db.ExecContext(ctx, q.stmt(vacuum))
	return err
}

// analyzeEvery is how often vacuumIfDue analyzes the jobs table at most.
const analyzeEvery = 10 * time.Minute

// foldCounts moves the shards in one statement: a DELETE ... RETURNING in
// a CTE whose rows are added to shard 0, skipping the shards an open
// transaction holds.
func (pgDialect) foldCounts(ctx context.Context, q *Queue) error {
	_, err := q.db.ExecContext(ctx, q.stmt(qFoldCounts))
	return err
}

func (pgDialect) dropFunctions(vars map[string]string) []string {
	return []string{"DROP FUNCTION IF EXISTS " + vars["count_ins_fn"] + "(), " + vars["count_del_fn"] + "(), " + vars["count_upd_fn"] + "(), " +
		vars["sched_ins_fn"] + "(), " + vars["sched_del_fn"] + "(), " + vars["sched_upd_fn"] + "(), " + vars["leases_fn"] + "(TEXT[], TEXT[])"}
}

// pgUncounted begins the claim statement: the jobs table's update trigger
// skips the statements that begin with it (migration 0023). A claim
// changes no job's state or queue, and the only scheduled bucket it takes
// a job out of is the current one or one that has passed, which Counts
// never reads (see readScheduled), so counting it was work for nothing:
// some 40 us of a one-job claim's 250 (run AY). Only a statement that
// changes none of what Counts reads may begin with it; the maintenance
// pass drops the past buckets that keep the jobs claimed from them
// (pruneScheduledCounts).
const pgUncounted = "/* meridian: a claim, counted by no trigger */ "

// pgWrites are PostgreSQL's statements that write the jobs table (claims,
// the lease-guarded changes, pushes and revivals, dead letters and bulk
// actions) and the few others its operations run: see query. Each is
// whole here; the constants below are parts several of them share.
var pgWrites = queryTemplates{
	// The claim (reserve): one statement; see reserve. It begins with
	// pgUncounted.
	qClaim:     pgClaim(""),
	qClaimFrom: pgClaim(pgClaimAfter),

	// The loose scan of one queue's priorities (hasReady's steps).
	qClaimTop:  "SELECT priority FROM {jobs} WHERE queue = ? AND state = 'pending' ORDER BY priority DESC LIMIT 1",
	qClaimNext: "SELECT priority FROM {jobs} WHERE queue = ? AND state = 'pending' AND priority < ? ORDER BY priority DESC LIMIT 1",

	// One job under its lease.
	qAckDelete:    "DELETE FROM {jobs} WHERE " + pgLeased,
	qAckDone:      "UPDATE {jobs} SET state = 'done', finished_at = ?, updated_at = ? WHERE " + pgLeased,
	qRetryLeased:  "UPDATE {jobs} SET history = " + pgHistory + ", lease_token = NULL, lease_expires_at = 0, run_at = ?, available_at = ?, last_error = ?, updated_at = ? WHERE " + pgLeased,
	qDeadLeased:   "UPDATE {jobs} SET history = " + pgHistory + ", state = 'dead', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ?, max_attempts = COALESCE(NULLIF(?, 0), max_attempts) WHERE " + pgLeased,
	qCancelLeased: "UPDATE {jobs} SET state = 'cancelled', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + pgLeased,
	qSnoozeLeased: "UPDATE {jobs} SET attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, snoozes = snoozes + ?, lease_token = NULL, lease_expires_at = 0," +
		" run_at = ?, available_at = ?, updated_at = ? WHERE " + pgLeased,

	// Many jobs under their leases (finishLeases): the leases are two
	// text arrays (IDs, tokens), then now.
	qStartLeases:     pgStartLeases,
	qAckLeases:       pgAckLeases,
	qDoneLeases:      pgDoneLeases,
	qExtendLeases:    "UPDATE {jobs} t SET lease_expires_at = ?, updated_at = GREATEST(updated_at + 1, ?) FROM" + pgLeasesFrom,
	qStartAckLeases:  "WITH c0 AS (" + pgStartLeases + "), c1 AS (" + pgAckLeases + ") " + pgBothParts,
	qStartDoneLeases: "WITH c0 AS (" + pgStartLeases + "), c1 AS (" + pgDoneLeases + ") " + pgBothParts,

	// Pushes and revivals.
	qInsertJobs: pgInsertJobs,
	qInsertJobsNotify: "WITH ins AS (" + pgInsertJobs + ") SELECT id FROM ins UNION ALL SELECT NULL FROM (" + pgNotify +
		") n WHERE EXISTS (SELECT 1 FROM ins)",
	qNotify:         pgNotify,
	qInsertJobsHeld: pgInsertJobsHeld,
	qInsertJobsHeldNotify: "WITH ins AS (" + pgInsertJobsHeld + ") SELECT id FROM ins UNION ALL SELECT NULL FROM (" + pgNotify +
		") n WHERE EXISTS (SELECT 1 FROM ins)",
	qRevive: `UPDATE {jobs} SET seq = DEFAULT, queue = ?, name = ?, payload = ?, priority = ?, attempts = 0,
  max_attempts = ?, timeout_us = ?, unique_key = ?, tags = ?, meta = ?, available_at = ?, run_at = ?, updated_at = ?,
  created_at = CASE WHEN state = 'dead' AND ? = 1 THEN created_at ELSE ? END,
  finished_at = 0, last_error = '', lease_token = NULL, lease_expires_at = 0, snoozes = 0, retry_until = ?, state = 'pending'
WHERE id = ? AND state <> 'pending' AND NOT EXISTS (SELECT 1 FROM {jobs} o WHERE o.queue = ? AND o.unique_key = ? AND o.state = 'pending')`,
	qReviveHeld: `UPDATE {jobs} SET seq = DEFAULT, queue = ?, name = ?, payload = ?, priority = ?, attempts = 0,
  max_attempts = ?, timeout_us = ?, unique_key = ?, tags = ?, meta = ?, available_at = ?, run_at = ?, updated_at = ?,
  created_at = CASE WHEN state = 'dead' AND ? = 1 THEN created_at ELSE ? END,
  finished_at = 0, last_error = '', lease_token = NULL, lease_expires_at = 0, snoozes = 0, retry_until = ?, state = 'pending', unique_hold = ?
WHERE id = ? AND state <> 'pending' AND NOT EXISTS (SELECT 1 FROM {jobs} o WHERE o.queue = ? AND o.unique_key = ? AND o.id <> ?
  AND (o.state = 'pending' OR strpos(o.unique_hold, ',' || o.state || ',') > 0))`,
	qReplaceWaiting: "DELETE FROM {jobs} WHERE queue = ? AND unique_key = ? AND state = 'pending' AND lease_token IS NULL AND id <> ?",

	// Dead letters, cancels, bulk actions and pruning.
	qRetryDead:        pgRetryDead + " WHERE id = ? AND state = 'dead'",
	qRetryDeadIn:      pgRetryDead + " WHERE id IN (?) AND state = 'dead'",
	qRetryDeadInNoted: pgRetryDead + ", history = " + pgAction + " WHERE id IN (?) AND state = 'dead'",
	qAmendRetry:       "UPDATE {jobs} SET history = " + pgAction + ", payload = ?, state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0 WHERE id = ? AND state = ?",
	qAmendRunNow:      "UPDATE {jobs} SET history = " + pgAction + ", available_at = ?, run_at = ?, updated_at = ? WHERE id = ? AND state = 'pending' AND lease_token IS NULL AND run_at > ?",
	qAmendNote:        "UPDATE {jobs} SET history = " + pgAction + " WHERE id = ?",
	qForgetDead:       "DELETE FROM {jobs} WHERE id = ? AND state = 'dead'",
	qForgetDeadIn:     "DELETE FROM {jobs} WHERE id IN (?) AND state = 'dead'",
	qCancelJob:        pgCancel + " WHERE id = ? AND state IN ('pending', 'grouped', 'sequenced')",
	qCancelJobsIn:     pgCancel + " WHERE id IN (?) AND state IN ('pending', 'grouped', 'sequenced')",
	qDeleteWaitingIn:  "DELETE FROM {jobs} WHERE id IN (?) AND state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL",
	qDeleteInState:    "DELETE FROM {jobs} WHERE id IN (?) AND state = ?",
	qDeadIDs:          "SELECT id FROM {jobs} WHERE state = 'dead' LIMIT " + pruneBatchLit,
	qDeadIDsOf:        "SELECT id FROM {jobs} WHERE state = 'dead' AND queue = ? LIMIT " + pruneBatchLit,
	qWaitingIDs:       "SELECT id FROM {jobs} WHERE state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL LIMIT " + pruneBatchLit,
	qWaitingIDsOf:     "SELECT id FROM {jobs} WHERE state IN ('pending', 'grouped', 'sequenced') AND lease_token IS NULL AND queue = ? LIMIT " + pruneBatchLit,

	qLeaseEpoch:       "SELECT epoch FROM {meta} WHERE name = ?",
	qLeaseEpochLocked: "SELECT epoch FROM {meta} WHERE name = ? FOR UPDATE",
	qInsertMembers:    "INSERT INTO {batch_jobs} (batch_id, job_id, state) VALUES {list (?, ?, 'pending')} ON CONFLICT DO NOTHING",

	qVacuumDue: `SELECT COALESCE(n_dead_tup >= GREATEST(CAST(? AS BIGINT), n_live_tup * CAST(? AS FLOAT8)), false),
  COALESCE(GREATEST(last_analyze, last_autoanalyze) < now() - make_interval(secs => ?), true)
FROM (SELECT 1) one LEFT JOIN pg_stat_user_tables ON relid = to_regclass(?)`,
	qVacuum:        "VACUUM (SKIP_LOCKED) {jobs}",
	qVacuumAnalyze: "VACUUM (ANALYZE, SKIP_LOCKED) {jobs}",
}

var (
	// pgLeased is the condition of a lease-guarded change of one job:
	// the lease (id, token, now).
	pgLeased = "id = ? AND lease_token = ? AND state = 'pending' AND lease_expires_at > ?"

	// pgHistory is the history column with the attempt under way appended
	// as it ends (the end time, then the error), the oldest entry dropped
	// (jsonb "- 0") once it holds queue.MaxHistory: a JSON array of
	// historyEntry. It reads attempts, started_at and worker as the row
	// has them.
	pgHistory = `(CASE WHEN history IS NULL OR history = '' THEN '[]'::jsonb WHEN jsonb_array_length(history::jsonb) >= ` + maxHistoryLit +
		` THEN history::jsonb - 0 ELSE history::jsonb END || jsonb_build_object('a', attempts, 's', started_at, 'f', CAST(? AS BIGINT), 'e', CAST(? AS TEXT), 'w', worker))::text`

	// pgAction is the history column with an operator's action appended
	// (at, by, what), the oldest entry dropped once it holds
	// queue.MaxHistory, as pgHistory does for attempts.
	pgAction = `(CASE WHEN history IS NULL OR history = '' THEN '[]'::jsonb WHEN jsonb_array_length(history::jsonb) >= ` + maxHistoryLit +
		` THEN history::jsonb - 0 ELSE history::jsonb END || jsonb_build_object('t', CAST(? AS BIGINT), 'by', CAST(? AS TEXT), 'do', CAST(? AS TEXT)))::text`

	// pgLeasesFrom ends a change of many jobs under their leases: the
	// leases as two text arrays and now. The lease terms are wrapped in
	// IS TRUE so that the primary key is the only index the planner can
	// use: bare, "lease_expires_at > $n" could match an index, where the
	// primary key reads only the leased rows. The leases come through
	// {leases_fn} (the lease_fn migration: unnest in a PL/pgSQL function
	// declared to return one row), never from unnest itself: unnest of a
	// parameter is assumed to give ten rows in the generic plan, which
	// then costs more than the custom plan of a batch of one or two and
	// is never kept, so every mark and ack was planned afresh (at 1,000
	// jobs/s about as long as it ran: run AN). With the function's
	// estimate the same in both, the generic plan, a nested loop over the
	// primary key whatever the table's statistics, is kept after five
	// calls; a VALUES list of an analyzed table would become a hash join
	// over a sequential scan.
	pgLeasesFrom  = " {leases_fn}(CAST(? AS TEXT[]), CAST(? AS TEXT[])) AS v(id, tok)" + pgLeasesWhere
	pgLeasesWhere = " WHERE t.id = v.id AND (t.lease_token = v.tok AND t.state = 'pending' AND t.lease_expires_at > ?) IS TRUE RETURNING t.id, t.lease_token"
	pgStartLeases = "UPDATE {jobs} t SET attempts = attempts + 1, updated_at = GREATEST(updated_at + 1, ?), started_at = ? FROM" + pgLeasesFrom
	pgAckLeases   = "DELETE FROM {jobs} t USING" + pgLeasesFrom
	pgDoneLeases  = "UPDATE {jobs} t SET state = 'done', finished_at = ?, updated_at = ? FROM" + pgLeasesFrom
	// pgBothParts returns the rows of two data-modifying CTEs, c0 and c1,
	// told apart by their part's number.
	pgBothParts = "SELECT 0, id, lease_token FROM c0 UNION ALL SELECT 1, id, lease_token FROM c1"

	// pgInsertJobs inserts the rows it can and returns their IDs.
	pgInsertJobs = "INSERT INTO {jobs} (" + insertCols + ") VALUES {list " + insertRow + "} ON CONFLICT DO NOTHING RETURNING id"
	// pgInsertJobsHeld is pgInsertJobs for jobs that name UniqueStates.
	pgInsertJobsHeld = "INSERT INTO {jobs} (" + heldCols + ") VALUES {list " + heldRow + "} ON CONFLICT DO NOTHING RETURNING id"
	// pgNotify wakes the listeners of a channel with a payload.
	pgNotify = "SELECT pg_notify(?, ?)"

	// pgRetryDead makes dead letters pending again, available now (now,
	// now, now), attempts reset; pgCancel cancels jobs (now, now, the
	// error recorded).
	pgRetryDead = "UPDATE {jobs} SET state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0"
	pgCancel    = "UPDATE {jobs} SET state = 'cancelled', finished_at = ?, updated_at = ?, last_error = ?"
)
