package sqlqueue

import (
	"cmp"
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
}

func (pgDialect) name() Dialect         { return Postgres }
func (pgDialect) quote(s string) string { return quoteDouble(s) }
func (pgDialect) maxParams() int        { return 65535 }

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
func (pgDialect) reserve(ctx context.Context, q *Queue, queues []string, max int, now, expires time.Time, token string, inc int) ([]row, error) {
	if len(queues) > 1 {
		var err error
		if queues, err = q.unpaused(ctx, stmts(q.db), queues); err != nil || len(queues) == 0 {
			return nil, err
		}
	}
	args := append(queueArgs(queues), micros(now), micros(now))
	args = append(args, queueArgs(queues)...)
	args = append(args, max, inc, token, micros(expires), micros(now), micros(now), queue.WorkerOf(ctx))
	rs, err := q.reads().Query(ctx, q.stmtN(qClaim, len(queues)), args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	got := make([]row, 0, max)
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
	slices.SortFunc(got, func(a, b row) int {
		return cmp.Or(cmp.Compare(b.job.Priority, a.job.Priority), cmp.Compare(a.runAt, b.runAt), cmp.Compare(a.seq, b.seq))
	})
	exp, upd := micros(expires), micros(now)
	for i := range got {
		r := &got[i]
		r.job.LeaseToken = token + "-" + strconv.FormatInt(r.seq, 10)
		r.job.LeaseExpiresAt = fromMicros(exp)
		r.runAt, r.updatedAt, r.state = exp, upd, statePending
	}
	return got, nil
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
	s.f.decode(&r)
	return r, nil
}

// insertJobs inserts with ON CONFLICT DO NOTHING RETURNING id
// (qInsertJobs). With notify (a push inside the caller's transaction) the
// same statement sends the push's notification when it inserted anything
// (qInsertJobsNotify): the NULL row is the notification's.
func (pgDialect) insertJobs(ctx context.Context, q *Queue, ex statements, js []queue.Job, now time.Time, notify bool) (map[string]bool, bool, error) {
	args := insertArgs(js, now)
	if !notify {
		return insertReturning(ctx, ex, q.stmtN(qInsertJobs, len(js)), args)
	}
	args = append(args, q.NotifyChannel(), notifyPayload(js, nil))
	return insertReturning(ctx, ex, q.stmtN(qInsertJobsNotify, len(js)), args)
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
type announcer struct {
	mu      sync.Mutex
	queues  []string
	running bool
	wg      sync.WaitGroup
}

// announceTimeout bounds one notification round trip.
const announceTimeout = 5 * time.Second

// announce queues the notification for the stored jobs of js (all of them
// when stored is nil).
func (pgDialect) announce(q *Queue, js []queue.Job, stored []bool) {
	a := &q.announcer
	a.mu.Lock()
	defer a.mu.Unlock()
	added := false
	for i, j := range js {
		if stored != nil && !stored[i] {
			continue
		}
		added = true
		if name := j.QueueName(); !slices.Contains(a.queues, name) {
			a.queues = append(a.queues, name)
		}
	}
	if !added || a.running {
		return
	}
	a.running = true
	a.wg.Add(1)
	go announceLoop(q)
}

// announceLoop sends the collected notifications until none is left. A
// notification that fails is logged and dropped: waiters still find the
// jobs at their next poll.
func announceLoop(q *Queue) {
	a := &q.announcer
	defer a.wg.Done()
	for {
		a.mu.Lock()
		queues := a.queues
		a.queues = nil
		if len(queues) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		payload := strings.Join(queues, "\n")
		if len(payload) > maxNotifyPayload {
			payload = ""
		}
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
func (pgDialect) finishLeases(ctx context.Context, q *Queue, parts []leaseStmt, now int64) ([]map[queue.Lease]bool, error) {
	if len(parts) == 1 {
		p := parts[0]
		done := make(map[queue.Lease]bool, len(p.leases))
		err := scanLeases(ctx, q.reads(), done, q.stmt(leaseQueries[p.op].many), pgLeaseArgs(q, p.leases, now, p.args)...)
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
	rows, err := q.reads().Query(ctx, q.stmt(stmt), args...)
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

// pgState is the SQLSTATE of err from a driver whose errors report one
// (pgx's *pgconn.PgError, lib/pq's *pq.Error).
// isConflict is a deadlock or a serialization failure, each of which
// aborts the whole transaction.
func (pgDialect) isConflict(err error) bool {
	code, _ := pgState(err)
	return code == pgerrcode.DeadlockDetected || code == pgerrcode.SerializationFailure
}

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

// vacuumIfDue vacuums the jobs table when its statistics count at least
// vacuumDeadRows dead rows: on a server with autovacuum off, nothing else
// would, and claims would walk ever more dead index entries. Claims are HOT updates, but acks delete rows whose index
// entries stay at the head of the claim index until a vacuum removes them.
//
// It analyzes the table too when no analyze (its own or autovacuum's) ran
// in the last analyzeEvery: the planner's figures of a queue table go stale
// quickly, but the claim and ack plans hold in every state of them (see
// finishLeases and reserve), and an ANALYZE with every vacuum, every
// 100,000 acks, costs a burn-down more than stale figures do.
func (pgDialect) vacuumIfDue(ctx context.Context, q *Queue) error {
	var due, analyze bool
	err := queryRow(ctx, stmts(q.db), q.stmt(qVacuumDue), []any{q.vac.minDeadRows(), analyzeEvery.Seconds(), q.t.jobs}, &due, &analyze)
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

func (pgDialect) dropCountFunctions(vars map[string]string) []string {
	return []string{"DROP FUNCTION IF EXISTS " + vars["count_ins_fn"] + "(), " + vars["count_del_fn"] + "(), " + vars["count_upd_fn"] + "(), " +
		vars["sched_ins_fn"] + "(), " + vars["sched_del_fn"] + "(), " + vars["sched_upd_fn"] + "()"}
}
