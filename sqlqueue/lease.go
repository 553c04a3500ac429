package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// leaseGuard is the condition every lease-guarded statement carries: the
// job is pending under this token and the lease has not expired.
const leaseGuard = "id = ? AND lease_token = ? AND state = 'pending' AND {expiry} > ?"

// Reserve leases up to max ready jobs of queues (see queue.Queue). Paused
// queues are skipped. A lease of zero or less means the visibility timeout.
//
// PostgreSQL claims in one statement (UPDATE ... FROM (SELECT ... FOR
// UPDATE SKIP LOCKED) RETURNING); MySQL/MariaDB in one short READ
// COMMITTED transaction (SELECT ... FOR UPDATE SKIP LOCKED, then UPDATE by
// primary key); SQLite in one BEGIN IMMEDIATE transaction. Every reserved
// job gets its own lease token.
func (q *Queue) Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, 1)
}

// ReserveUnstarted is Reserve without counting the attempt (see
// queue.Starter): the claim leaves attempts as stored, and Start counts it.
func (q *Queue) ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, 0)
}

// Start counts one attempt for the job under each lease that is current, in
// one statement per chunk of leases (one short transaction on
// MySQL/MariaDB), and returns the leases that were not current. Its error
// means no attempt is known to be counted.
func (q *Queue) Start(ctx context.Context, leases []queue.Lease) ([]queue.Lease, error) {
	return q.leaseBatch(ctx, "starting", leases, q.startSet)
}

// reserve is Reserve, adding inc to each claimed job's attempts.
func (q *Queue) reserve(ctx context.Context, queues []string, max int, lease time.Duration, inc int) ([]queue.Job, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, nil
	}
	if len(queues) == 0 {
		queues = []string{queue.DefaultQueue}
	}
	if lease <= 0 {
		lease = q.cfg.visibility
	}
	now := time.Now()
	token := queue.NewToken()
	rows, err := q.d.reserve(ctx, q, queues, max, now, now.Add(lease), token, inc)
	if err != nil {
		return nil, q.wrap(ctx, err, "reserving jobs")
	}
	jobs := make([]queue.Job, len(rows))
	for i, r := range rows {
		jobs[i] = r.job
	}
	return jobs, nil
}

func queueArgs(queues []string) []any {
	args := make([]any, 0, len(queues)+4)
	for _, name := range queues {
		args = append(args, name)
	}
	return args
}

// unpaused returns queues without the paused ones.
func (q *Queue) unpaused(ctx context.Context, st statements, queues []string) ([]string, error) {
	paused, err := queryStrings(ctx, st, q.stmt(qPaused))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(queues), func(name string) bool { return slices.Contains(paused, name) }), nil
}

// claimStatements are the parts of a dialect's select-then-update claim:
// lock ends the SELECT (a locking read, or ""), token is the expression of
// each job's lease token from the reservation's token (a bind parameter)
// and the row's seq, and key is the column the UPDATE finds the selected
// rows by.
type claimStatements struct {
	lock, token, key string
	keyOf            func(r row) any // the key column's value of r
}

// selectThenClaim is the claim as a select then an update by key, inside
// the caller's write transaction ex (MySQL, SQLite).
func (q *Queue) selectThenClaim(ctx context.Context, d dialect, ex execer, queues []string, max int, now, expires time.Time, token string, inc int, c claimStatements) ([]row, error) {
	queues, err := q.unpaused(ctx, stmts(ex), queues)
	if err != nil || len(queues) == 0 {
		return nil, err
	}
	ready, readyArgs := d.readyCond("", micros(now))
	query := q.sql("SELECT " + jobCols + " FROM {jobs} WHERE state = 'pending' AND queue IN (" + placeholders(len(queues)) +
		") AND " + ready + " ORDER BY priority DESC, run_at, seq LIMIT ?" + c.lock)
	// scanRows has closed the rows when it returns, so the update below
	// can run on the same connection.
	got, err := q.scanRows(ctx, stmts(ex), query, append(append(queueArgs(queues), readyArgs...), max))
	if err != nil || len(got) == 0 {
		return nil, err
	}
	args := []any{inc, token, micros(expires), micros(now)}
	var keys []any
	for _, r := range got {
		keys = append(keys, c.keyOf(r))
	}
	args = append(args, micros(now), queue.WorkerOf(ctx))
	update := q.sql("UPDATE {jobs} SET attempts = attempts + ?, lease_token = " + c.token +
		", {expiry} = ?, updated_at = ?, started_at = ?, worker = ? WHERE " + c.key + " IN (" + placeholders(len(got)) + ")")
	if _, err := ex.ExecContext(ctx, update, append(args, keys...)...); err != nil {
		return nil, err
	}
	for i := range got {
		r := &got[i]
		r.job.Recovered = r.job.LeaseToken != "" // its last lease expired
		r.job.Attempts += inc
		r.job.LeaseToken = token + "-" + strconv.FormatInt(r.seq, 10)
		r.job.LeaseExpiresAt = expires
		r.runAt, r.updatedAt = micros(expires), micros(now)
	}
	return got, nil
}

// guarded changes the job under l with head (an UPDATE with its SET, or
// a DELETE, with args: see execLeased) where leaseGuard holds, and turns
// "no row" into ErrLeaseLost.
func (q *Queue) guarded(ctx context.Context, what string, l queue.Lease, head string, args ...any) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	n, err := q.execLeased(ctx, stmts(q.db), head, l, micros(time.Now()), args...)
	return q.leaseHeld(ctx, what, l, n, err)
}

// leaseHeld wraps the error of a lease-guarded statement that changed n
// rows, and turns "no row" into ErrLeaseLost.
func (q *Queue) leaseHeld(ctx context.Context, what string, l queue.Lease, n int64, err error) error {
	if err != nil {
		return q.wrap(ctx, err, "%s job %s", what, l.JobID)
	}
	if n == 0 {
		return fmt.Errorf("sqlqueue: %s job %s: %w", what, l.JobID, queue.ErrLeaseLost)
	}
	return nil
}

// finishSet is the SET clause that marks a job done, or "" when acked jobs
// are deleted (no retention of finished jobs).
func (q *Queue) finishSet() string {
	if q.cfg.keepFinished > 0 {
		// The token stays on the done row so a batch ack can return it.
		return "state = 'done', finished_at = ?, updated_at = ?"
	}
	return ""
}

// Ack finishes the job under l: it is deleted, or kept as done when
// WithRetention keeps finished jobs. A lease that is not the job's
// current, unexpired one returns ErrLeaseLost. Buffered run metrics are
// written with it when due.
func (q *Queue) Ack(ctx context.Context, l queue.Lease) error {
	var err error
	if set := q.finishSet(); set != "" {
		now := micros(time.Now())
		err = q.guarded(ctx, "acking", l, "UPDATE {jobs} SET "+set, now, now)
	} else {
		err = q.guarded(ctx, "acking", l, "DELETE FROM {jobs}")
	}
	if err != nil {
		return err
	}
	q.flushMetricsIfDue(ctx)
	return nil
}

// AckMany acks every lease it can in one statement (one short transaction
// on MySQL/MariaDB) and returns the leases that were no longer current. Its
// error means nothing is known to be acked. Buffered run metrics are
// written with it when due.
func (q *Queue) AckMany(ctx context.Context, leases []queue.Lease) ([]queue.Lease, error) {
	lost, err := q.changeLeases(ctx, "acking", leaseChange{leases, q.ackSet, true})
	if err != nil {
		return nil, err
	}
	q.countAcked(len(leases) - len(lost))
	q.flushMetricsIfDue(ctx)
	return lost[0], nil
}

// ExtendMany moves the expiry of every lease it can to now plus d, in one
// statement per chunk of leases (one short transaction on MySQL/MariaDB),
// and returns the leases that were no longer current. Its error means no
// lease is known to be extended.
func (q *Queue) ExtendMany(ctx context.Context, leases []queue.Lease, d time.Duration) ([]queue.Lease, error) {
	return q.leaseBatch(ctx, "extending the leases of", leases, func(now int64) (string, []any) {
		// updated_at always changes, as in Extend, so MySQL's count of
		// changed rows is the count of leases that held.
		return "{expiry} = ?, updated_at = " + q.d.touch(), []any{now + d.Microseconds(), now}
	})
}

// StartAck counts one attempt for the job under each current lease of
// starts (as Start) and acks the job under each current lease of acks (as
// AckMany) in one transaction per chunk of leases (queue.StartAcker): one
// commit where Start and AckMany took two. It returns the leases of each
// list that were not current; its error means nothing is known to be
// counted or acked. Buffered run metrics are written with it when due.
func (q *Queue) StartAck(ctx context.Context, starts, acks []queue.Lease) (lostStarts, lostAcks []queue.Lease, err error) {
	lost, err := q.changeLeases(ctx, "starting and acking",
		leaseChange{starts, q.startSet, false},
		leaseChange{acks, q.ackSet, true})
	if err != nil {
		return nil, nil, err
	}
	if len(acks) > 0 {
		q.countAcked(len(acks) - len(lost[1]))
		q.flushMetricsIfDue(ctx)
	}
	return lost[0], lost[1], nil
}

// startSet is Start's SET clause: the attempt counted and dated (its
// start, for the attempt history). updated_at always changes, so MySQL's
// count of changed rows is the count of leases that held.
func (q *Queue) startSet(now int64) (string, []any) {
	return "attempts = attempts + 1, updated_at = " + q.d.touch() + ", started_at = ?", []any{now, now}
}

// ackSet is an ack's SET clause ("": the rows are deleted).
func (q *Queue) ackSet(now int64) (string, []any) {
	if set := q.finishSet(); set != "" {
		return set, []any{now, now}
	}
	return "", nil
}

// leaseBatch applies one change to the jobs under leases, in chunks: set
// gives the SET clause and its arguments at the chunk's time (an empty
// clause deletes the jobs). Only jobs whose lease is current are changed;
// the others are returned as lost.
func (q *Queue) leaseBatch(ctx context.Context, what string, leases []queue.Lease, set func(now int64) (string, []any)) ([]queue.Lease, error) {
	lost, err := q.changeLeases(ctx, what, leaseChange{leases, set, false})
	if err != nil {
		return nil, err
	}
	return lost[0], nil
}

// leaseChange is one change to the jobs under leases: set gives the SET
// clause and its arguments at the time of the chunk (an empty clause
// deletes the jobs). finish is set when the change acks the jobs (moves
// them from pending to done, or deletes them).
type leaseChange struct {
	leases []queue.Lease
	set    func(now int64) (string, []any)
	finish bool
}

// leaseStmt is one chunk of a leaseChange, for the dialect.
type leaseStmt struct {
	leases []queue.Lease
	set    string
	args   []any
	finish bool
}

// changeLeases applies changes to the jobs under their leases whose lease
// is current, in rounds: each round takes up to maxChunkRows leases of
// every change and is one call of the dialect (one statement or one
// transaction). It returns, per change, the leases that were not current.
func (q *Queue) changeLeases(ctx context.Context, what string, changes ...leaseChange) ([][]queue.Lease, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	lost := make([][]queue.Lease, len(changes))
	total, most := 0, 0
	for _, c := range changes {
		total += len(c.leases)
		most = max(most, len(c.leases))
	}
	for start := 0; start < most; start += maxChunkRows {
		now := micros(time.Now())
		var parts []leaseStmt
		var of []int // the change of each part
		for i, c := range changes {
			if start >= len(c.leases) {
				continue
			}
			set, args := c.set(now)
			parts = append(parts, leaseStmt{c.leases[start:min(start+maxChunkRows, len(c.leases))], set, args, c.finish})
			of = append(of, i)
		}
		done, err := q.d.finishLeases(ctx, q, parts, now)
		if err != nil {
			return nil, q.wrap(ctx, err, "%s %d jobs", what, total)
		}
		for k, p := range parts {
			for _, l := range p.leases {
				if !done[k][l] {
					lost[of[k]] = append(lost[of[k]], l)
				}
			}
		}
	}
	return lost, nil
}

// arrayArgs returns args followed by the leases as two text-array
// literals (pgArray: IDs, then tokens) and now: the arguments of a
// dialect's batch statement that takes the leases as arrays.
func arrayArgs(leases []queue.Lease, now int64, args []any) []any {
	ids, toks := make([]string, len(leases)), make([]string, len(leases))
	for i, l := range leases {
		ids[i], toks[i] = l.JobID, l.Token
	}
	return append(slices.Clip(args), pgArray(ids), pgArray(toks), now)
}

// errPairMismatch rolls back a dialect's batch statement that matched the
// leases by token alone (finishLeases) when it met a token current for
// another job than the one its lease names; the exact statement runs then.
var errPairMismatch = errors.New("sqlqueue: a lease token names another job")

// checkPairs returns errPairMismatch if done, the leases a statement that
// matched rows by token alone changed, holds one not among leases.
func checkPairs(leases []queue.Lease, done map[queue.Lease]bool) error {
	if len(done) == 0 {
		return nil
	}
	named := make(map[queue.Lease]bool, len(leases))
	for _, l := range leases {
		named[l] = true
	}
	for l := range done {
		if !named[l] {
			return errPairMismatch
		}
	}
	return nil
}

// finishByArrays runs on st a dialect's batch statement whose arguments
// are arrayArgs, and returns the (id, lease_token) of the rows it finished.
func (q *Queue) finishByArrays(ctx context.Context, st statements, stmt string, leases []queue.Lease, now int64, args []any) (map[queue.Lease]bool, error) {
	done := make(map[queue.Lease]bool, len(leases))
	err := scanLeases(ctx, st, done, q.sql(stmt), arrayArgs(leases, now, args)...)
	return done, err
}

// reads returns the statements for a read of many rows in one statement
// (a claim, a batch ack's returned leases): the driver's own client when
// the registration package gave one (hook.Queue.Direct), else the DB.
func (q *Queue) reads() statements {
	if q.direct != nil {
		return q.direct
	}
	return stmts(q.db)
}

// scanLeases runs a query returning (id, lease_token) rows into set.
func scanLeases(ctx context.Context, st statements, set map[queue.Lease]bool, query string, args ...any) error {
	rows, err := st.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var l queue.Lease
		if err := rows.Scan(&l.JobID, &l.Token); err != nil {
			return err
		}
		set[l] = true
	}
	return rows.Err()
}

// scanFinished runs a query returning (id, lease_token) rows: the leases
// it finished, returned.
func scanFinished(ctx context.Context, st statements, query string, args []any) (map[queue.Lease]bool, error) {
	done := map[queue.Lease]bool{}
	return done, scanLeases(ctx, st, done, query, args...)
}

// Nack releases the job under l for another attempt at retryAt (now if
// zero), recording reason. ErrLeaseLost if l is not current.
func (q *Queue) Nack(ctx context.Context, l queue.Lease, retryAt time.Time, reason string) error {
	now := time.Now()
	if retryAt.IsZero() {
		retryAt = now
	}
	at := micros(retryAt)
	hist, hargs := q.historySet(micros(now), reason)
	err := q.guarded(ctx, "releasing", l, "UPDATE {jobs} SET "+hist+", lease_token = NULL{unlease}, run_at = ?, available_at = ?, last_error = ?, updated_at = ?",
		append(hargs, at, at, reason, micros(now))...)
	if err != nil {
		return err
	}
	q.wake.at(retryAt)
	q.flushMetricsIfDue(ctx)
	return nil
}

// Fail moves the job under l to the dead letters with reason.
// ErrLeaseLost if l is not current.
func (q *Queue) Fail(ctx context.Context, l queue.Lease, reason string) error {
	now := micros(time.Now())
	hist, hargs := q.historySet(now, reason)
	err := q.guarded(ctx, "dead-lettering", l, "UPDATE {jobs} SET "+hist+", state = 'dead', lease_token = NULL{unlease}, last_error = ?, finished_at = ?, updated_at = ?",
		append(hargs, reason, now, now)...)
	if err != nil {
		return err
	}
	q.flushMetricsIfDue(ctx)
	return nil
}

// Extend moves the expiry of lease l to now plus d. ErrLeaseLost if l is
// not current (expired leases cannot be revived).
func (q *Queue) Extend(ctx context.Context, l queue.Lease, d time.Duration) error {
	now := time.Now()
	// updated_at always changes, so MySQL's affected-rows count (changed
	// rows, not matched rows) is 1 whenever the lease held.
	if err := q.use(ctx); err != nil {
		return err
	}
	n, err := stmts(q.db).Exec(ctx, q.sql("UPDATE {jobs} SET {expiry} = ?, updated_at = "+q.d.touch()+" WHERE "+leaseGuard),
		micros(now.Add(d)), micros(now), l.JobID, l.Token, micros(now))
	return q.leaseHeld(ctx, "extending the lease of", l, n, err)
}

// pgArray is the PostgreSQL text-array literal of ss, every element
// quoted, so it passes as one text parameter through any driver.
func pgArray(ss []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for j := 0; j < len(s); j++ {
			if s[j] == '"' || s[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}
