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
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// leaseGuard is the condition every lease-guarded statement carries: the
// job is pending under this token and the lease has not expired.
const leaseGuard = "id = ? AND lease_token = ? AND state = 'pending' AND {expiry} > ?"

// readyCond is the condition (and its arguments) that a pending row may be
// claimed at now: its run_at has come and, where the lease expiry has a
// column of its own, it holds no unexpired lease.
func (q *Queue) readyCond(alias string, now int64) (string, []any) {
	if q.d.leaseCol == "" {
		return alias + "run_at <= ?", []any{now}
	}
	return alias + "run_at <= ? AND " + alias + q.d.leaseCol + " <= ?", []any{now, now}
}

// Reserve leases up to max ready jobs of queues (see queue.Queue). Paused
// queues are skipped. A lease of zero or less means the visibility timeout.
//
// PostgreSQL claims in one statement (UPDATE ... FROM (SELECT ... FOR
// UPDATE SKIP LOCKED) RETURNING); MySQL/MariaDB in one short READ
// COMMITTED transaction (SELECT ... FOR UPDATE SKIP LOCKED, then UPDATE by
// primary key); SQLite in one BEGIN IMMEDIATE transaction. Every reserved
// job gets its own lease token.
func (q *Queue) Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
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
	var (
		rows []row
		err  error
	)
	if q.d.oneStatementReserve {
		rows, err = q.reserveOne(ctx, queues, max, now, now.Add(lease), token)
	} else {
		if q.d.immediate {
			// SQLite: look before taking the one write lock, so idle
			// pollers in other processes do not queue behind each other.
			var one int
			ready, readyArgs := q.readyCond("", micros(now))
			err := queryRow(ctx, stmts(q.db), q.sql("SELECT 1 FROM {jobs} WHERE state = 'pending' AND queue IN ("+placeholders(len(queues))+
				") AND "+ready+" LIMIT 1"), append(queueArgs(queues), readyArgs...), &one)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, nil
			}
			if err != nil {
				return nil, wrap(ctx, err, "reserving jobs")
			}
		}
		err = q.writeTx(ctx, func(ex execer) error {
			rows, err = q.reserveTwo(ctx, ex, queues, max, now, now.Add(lease), token)
			return err
		})
	}
	if err != nil {
		return nil, wrap(ctx, err, "reserving jobs")
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

// reserveOne is the one-statement claim. The rows come back in no order;
// they are sorted as claimed (priority, then the run_at they were claimed
// at, then insertion).
//
// The pause check is uncorrelated, so PostgreSQL runs it once as a
// One-Time Filter above the claim-index scan: correlated with the claimed
// rows (NOT EXISTS ... WHERE p.queue = j.queue), an analyzed table is
// claimed through a sequential scan, an anti join and a sort of every
// pending row (500 jobs over 1,000,000 queued: 1,238 ms, against 13.5 ms).
// A claim over several queues reads the pauses first and claims only from
// the queues not paused then; the statement checks those again, so a
// queue paused in between makes this one claim return nothing.
func (q *Queue) reserveOne(ctx context.Context, queues []string, max int, now, expires time.Time, token string) ([]row, error) {
	if len(queues) > 1 {
		paused, err := queryStrings(ctx, stmts(q.db), q.sql("SELECT queue FROM {pauses}"))
		if err != nil {
			return nil, err
		}
		queues = slices.DeleteFunc(slices.Clone(queues), func(name string) bool { return slices.Contains(paused, name) })
		if len(queues) == 0 {
			return nil, nil
		}
	}
	ready, readyArgs := q.readyCond("", micros(now))
	query := q.sql(`WITH c AS (
  SELECT id, run_at AS claimed_run_at FROM {jobs} j
  WHERE state = 'pending' AND queue IN (` + placeholders(len(queues)) + `) AND ` + ready + `
    AND NOT EXISTS (SELECT 1 FROM {pauses} p WHERE p.queue IN (` + placeholders(len(queues)) + `))
  ORDER BY priority DESC, run_at, seq
  LIMIT ?
  FOR UPDATE OF j SKIP LOCKED)
UPDATE {jobs} t SET attempts = t.attempts + 1, lease_token = ` + q.d.leaseToken("t.seq") + `, {expiry} = ?, updated_at = ?
FROM c WHERE t.id = c.id
RETURNING ` + jobColsT + `, c.claimed_run_at`)
	args := append(queueArgs(queues), readyArgs...)
	args = append(args, queueArgs(queues)...)
	args = append(args, max, token, micros(expires), micros(now))
	rs, err := q.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	type claimed struct {
		r     row
		runAt int64
	}
	var got []claimed
	for rs.Next() {
		var c claimed
		r, err := scanRow(rs, q.d.leaseCol != "", &c.runAt)
		if err != nil {
			return nil, err
		}
		c.r = r
		got = append(got, c)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(got, func(a, b claimed) int {
		if a.r.job.Priority != b.r.job.Priority {
			return b.r.job.Priority - a.r.job.Priority
		}
		if a.runAt != b.runAt {
			return compareInt64(a.runAt, b.runAt)
		}
		return compareInt64(a.r.seq, b.r.seq)
	})
	out := make([]row, len(got))
	for i, c := range got {
		out[i] = c.r
	}
	return out, nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// reserveTwo is the claim as a select then an update by primary key, inside
// the caller's write transaction.
func (q *Queue) reserveTwo(ctx context.Context, ex execer, queues []string, max int, now, expires time.Time, token string) ([]row, error) {
	notPaused := ""
	if q.d.pausesInClaim {
		notPaused = " AND queue NOT IN (SELECT queue FROM {pauses})"
	} else {
		paused, err := queryStrings(ctx, stmts(ex), q.sql("SELECT queue FROM {pauses}"))
		if err != nil {
			return nil, err
		}
		queues = slices.DeleteFunc(slices.Clone(queues), func(name string) bool { return slices.Contains(paused, name) })
		if len(queues) == 0 {
			return nil, nil
		}
	}
	ready, readyArgs := q.readyCond("", micros(now))
	query := q.sql("SELECT " + jobCols + " FROM {jobs} WHERE state = 'pending' AND queue IN (" + placeholders(len(queues)) +
		") AND " + ready + notPaused + " ORDER BY priority DESC, run_at, seq LIMIT ?" + q.d.skipLocked)
	// scanRows has closed the rows when it returns, so the update below
	// can run on the same connection.
	got, err := q.scanRows(ctx, stmts(ex), query, append(append(queueArgs(queues), readyArgs...), max))
	if err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, nil
	}
	// SQLite updates by seq, its rowid: by id every row costs a probe of
	// the id index first (1,000 rows: 11.5-17.5 ms, against 3-5.5 ms).
	// MySQL/MariaDB's rows are clustered on id.
	key := "id"
	args := []any{token, micros(expires), micros(now)}
	for _, r := range got {
		if q.d.immediate {
			args = append(args, r.seq)
		} else {
			args = append(args, r.job.ID)
		}
	}
	if q.d.immediate {
		key = "seq"
	}
	update := q.sql("UPDATE {jobs} SET attempts = attempts + 1, lease_token = " + q.d.leaseToken("seq") +
		", {expiry} = ?, updated_at = ? WHERE " + key + " IN (" + placeholders(len(got)) + ")")
	if _, err := ex.ExecContext(ctx, update, args...); err != nil {
		return nil, err
	}
	for i := range got {
		r := &got[i]
		r.job.Attempts++
		r.job.LeaseToken = token + "-" + strconv.FormatInt(r.seq, 10)
		r.job.LeaseExpiresAt = expires
		r.runAt, r.updatedAt = micros(expires), micros(now)
	}
	return got, nil
}

// guarded runs a lease-guarded statement and turns "no row" into
// ErrLeaseLost.
func (q *Queue) guarded(ctx context.Context, what string, l queue.Lease, query string, args ...any) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	res, err := q.db.ExecContext(ctx, q.sql(query), append(args, l.JobID, l.Token, micros(time.Now()))...)
	if err != nil {
		return wrap(ctx, err, "%s job %s", what, l.JobID)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrap(ctx, err, "%s job %s", what, l.JobID)
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
		err = q.guarded(ctx, "acking", l, "UPDATE {jobs} SET "+set+" WHERE "+leaseGuard, now, now)
	} else {
		err = q.guarded(ctx, "acking", l, "DELETE FROM {jobs} WHERE "+leaseGuard)
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
	lost, err := q.leaseBatch(ctx, "acking", leases, func(now int64) (string, []any) {
		if set := q.finishSet(); set != "" {
			return set, []any{now, now}
		}
		return "", nil
	})
	if err != nil {
		return nil, err
	}
	q.flushMetricsIfDue(ctx)
	return lost, nil
}

// ExtendMany moves the expiry of every lease it can to now plus d, in one
// statement per chunk of leases (one short transaction on MySQL/MariaDB),
// and returns the leases that were no longer current. Its error means no
// lease is known to be extended.
func (q *Queue) ExtendMany(ctx context.Context, leases []queue.Lease, d time.Duration) ([]queue.Lease, error) {
	return q.leaseBatch(ctx, "extending the leases of", leases, func(now int64) (string, []any) {
		// updated_at always changes, as in Extend, so MySQL's count of
		// changed rows is the count of leases that held.
		return "{expiry} = ?, updated_at = " + q.d.greatest + "(updated_at + 1, ?)", []any{now + d.Microseconds(), now}
	})
}

// leaseBatch applies one change to the jobs under leases, in chunks: set
// gives the SET clause and its arguments at the chunk's time (an empty
// clause deletes the jobs). Only jobs whose lease is current are changed;
// the others are returned as lost.
func (q *Queue) leaseBatch(ctx context.Context, what string, leases []queue.Lease, set func(now int64) (string, []any)) ([]queue.Lease, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, nil
	}
	var lost []queue.Lease
	for start := 0; start < len(leases); start += maxChunkRows {
		chunk := leases[start:min(start+maxChunkRows, len(leases))]
		now := micros(time.Now())
		clause, args := set(now)
		done, err := q.leaseChunk(ctx, chunk, now, clause, args)
		if err != nil {
			return nil, wrap(ctx, err, "%s %d jobs", what, len(leases))
		}
		for _, l := range chunk {
			if !done[l] {
				lost = append(lost, l)
			}
		}
	}
	return lost, nil
}

// leaseChunk changes (set, with args) or deletes (set empty) the jobs whose
// lease in leases is current at now, and returns those leases.
func (q *Queue) leaseChunk(ctx context.Context, leases []queue.Lease, now int64, set string, args []any) (map[queue.Lease]bool, error) {
	pairs := make([]any, 0, 2*len(leases))
	for _, l := range leases {
		pairs = append(pairs, l.JobID, l.Token)
	}
	done := make(map[queue.Lease]bool, len(leases))
	if q.d.ackArrays {
		ids, toks := make([]string, len(leases)), make([]string, len(leases))
		for i, l := range leases {
			ids[i], toks[i] = l.JobID, l.Token
		}
		err := q.scanLeases(ctx, stmts(q.db), done, q.sql(q.d.ackMany("{jobs}", len(leases), set)), append(args, pgArray(ids), pgArray(toks), now)...)
		return done, err
	}
	if q.d.returning {
		all := append(append(args, pairs...), now)
		if q.d.ackPairsFirst {
			all = append(append(pairs, args...), now)
		}
		err := q.scanLeases(ctx, stmts(q.db), done, q.sql(q.d.ackMany("{jobs}", len(leases), set)), all...)
		return done, err
	}
	// MySQL/MariaDB: finish the rows still under these leases in one
	// statement (by primary key: the id list leads). When it finished as
	// many rows as there are leases, every lease held; otherwise it is
	// rolled back and the rows still held are locked first, to learn
	// which leases were lost.
	ids := make([]any, len(leases))
	for i, l := range leases {
		ids[i] = l.JobID
	}
	where := " WHERE id IN (" + placeholders(len(ids)) + ") AND (id, lease_token) IN (" + tuples(len(leases), 2) + ") AND state = 'pending' AND {expiry} > ?"
	finish := "DELETE FROM {jobs}" + where
	if set != "" {
		finish = "UPDATE {jobs} SET " + set + where
	}
	err := q.writeTx(ctx, func(ex execer) error {
		res, err := ex.ExecContext(ctx, q.sql(finish), append(append(append(slices.Clip(args), ids...), pairs...), now)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(leases)) {
			return cmp.Or(err, errSomeLost)
		}
		return nil
	})
	if err == nil {
		for _, l := range leases {
			done[l] = true
		}
		return done, nil
	}
	if !errors.Is(err, errSomeLost) {
		return done, err
	}
	err = q.writeTx(ctx, func(ex execer) error {
		sel := q.sql("SELECT id, lease_token FROM {jobs} WHERE id IN (" + placeholders(len(ids)) + ") AND (id, lease_token) IN (" +
			tuples(len(leases), 2) + ") AND state = 'pending' AND {expiry} > ? FOR UPDATE")
		if err := q.scanLeases(ctx, stmts(ex), done, sel, append(append(ids, pairs...), now)...); err != nil || len(done) == 0 {
			return err
		}
		in := make([]any, 0, len(done))
		for l := range done {
			in = append(in, l.JobID)
		}
		stmt := "DELETE FROM {jobs} WHERE id IN (" + placeholders(len(in)) + ")"
		if set != "" {
			stmt = "UPDATE {jobs} SET " + set + " WHERE id IN (" + placeholders(len(in)) + ")"
		}
		_, err := ex.ExecContext(ctx, q.sql(stmt), append(args, in...)...)
		return err
	})
	if err != nil {
		clear(done) // rolled back: nothing is known to be acked
	}
	return done, err
}

// errSomeLost rolls back a batch ack on MySQL that finished fewer rows
// than it had leases.
var errSomeLost = errors.New("sqlqueue: some leases were lost")

// scanLeases runs a query returning (id, lease_token) rows into set.
func (q *Queue) scanLeases(ctx context.Context, st Statements, set map[queue.Lease]bool, query string, args ...any) error {
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

// Nack releases the job under l for another attempt at retryAt (now if
// zero), recording reason. ErrLeaseLost if l is not current.
func (q *Queue) Nack(ctx context.Context, l queue.Lease, retryAt time.Time, reason string) error {
	now := time.Now()
	if retryAt.IsZero() {
		retryAt = now
	}
	at := micros(retryAt)
	err := q.guarded(ctx, "releasing", l, "UPDATE {jobs} SET lease_token = NULL{unlease}, run_at = ?, available_at = ?, last_error = ?, updated_at = ? WHERE "+leaseGuard,
		at, at, reason, micros(now))
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
	err := q.guarded(ctx, "dead-lettering", l, "UPDATE {jobs} SET state = 'dead', lease_token = NULL{unlease}, last_error = ?, finished_at = ?, updated_at = ? WHERE "+leaseGuard,
		reason, now, now)
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
	return q.guarded(ctx, "extending the lease of", l, "UPDATE {jobs} SET {expiry} = ?, updated_at = "+q.d.greatest+"(updated_at + 1, ?) WHERE "+leaseGuard,
		micros(now.Add(d)), micros(now))
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
