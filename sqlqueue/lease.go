package sqlqueue

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Reserve leases up to max ready jobs of queues (see queue.Queue). Paused
// queues are skipped. A lease of zero or less means the visibility timeout.
//
// PostgreSQL claims in one statement that locks with SKIP LOCKED and
// returns the rows it leased (qClaim); MySQL/MariaDB in one short READ
// COMMITTED transaction (a locking read that skips locked rows, then a
// change by primary key: qClaimSelect, qClaimUpdate); SQLite in one BEGIN
// IMMEDIATE transaction. Every reserved job gets its own lease token.
func (q *Queue) Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, 1)
}

// ReserveUnstarted is Reserve without counting the attempt (see
// queue.Starter): the claim leaves attempts as stored, and Start counts it.
func (q *Queue) ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, 0)
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

// selectThenClaim is the claim as a read then an update by key, inside
// the caller's write transaction ex (MySQL, SQLite): qClaimSelect reads
// the ready jobs of the queues not paused (locking them where the dialect
// locks rows), and qClaimUpdate leases them by keyOf, the column the
// dialect finds rows by.
func (q *Queue) selectThenClaim(ctx context.Context, ex execer, queues []string, max int, now, expires time.Time, token string, inc int, keyOf func(r row) any) ([]row, error) {
	queues, err := q.unpaused(ctx, stmts(ex), queues)
	if err != nil || len(queues) == 0 {
		return nil, err
	}
	// scanRows has closed the rows when it returns, so the update below
	// can run on the same connection.
	got, err := q.scanRows(ctx, stmts(ex), q.stmtN(qClaimSelect, len(queues)), append(queueArgs(queues), micros(now), micros(now), max))
	if err != nil || len(got) == 0 {
		return nil, err
	}
	args := make([]any, 0, 6+len(got))
	args = append(args, inc, token, micros(expires), micros(now), micros(now), queue.WorkerOf(ctx))
	for _, r := range got {
		args = append(args, keyOf(r))
	}
	if _, err := ex.ExecContext(ctx, q.stmtN(qClaimUpdate, len(got)), args...); err != nil {
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

// ackQuery is the lease-guarded statement that acks one job at now, and
// its arguments: it deletes the job, or keeps it as done when
// WithRetention keeps finished jobs (the token stays on the done row so a
// batch ack can return it).
func (q *Queue) ackQuery(now int64) (query, []any) {
	if q.cfg.keepFinished > 0 {
		return qAckDone, []any{now, now}
	}
	return qAckDelete, nil
}

// ExtendMany moves the expiry of every lease it can to now plus d, in one
// statement per chunk of leases (one short transaction on MySQL/MariaDB),
// and returns the leases that were no longer current. Its error means no
// lease is known to be extended.
func (q *Queue) ExtendMany(ctx context.Context, leases []queue.Lease, d time.Duration) ([]queue.Lease, error) {
	return q.leaseBatch(ctx, "extending the leases of", leaseChange{leases: leases, op: leaseExtend, extend: d})
}

// ackChange is the ack of the jobs under leases: deleted, or kept as done
// under WithRetention (see ackQuery).
func (q *Queue) ackChange(leases []queue.Lease) leaseChange {
	if q.cfg.keepFinished > 0 {
		return leaseChange{leases: leases, op: leaseDone}
	}
	return leaseChange{leases: leases, op: leaseAck}
}

// leaseBatch applies one change to the jobs under their leases, in
// chunks. Only jobs whose lease is current are changed; the others are
// returned as lost.
func (q *Queue) leaseBatch(ctx context.Context, what string, c leaseChange) ([]queue.Lease, error) {
	lost, err := q.changeLeases(ctx, what, c)
	if err != nil {
		return nil, err
	}
	return lost[0], nil
}

// leaseOp is a change of many jobs under their leases, each a named
// statement of every dialect (leaseQueries).
type leaseOp int

const (
	leaseStart  leaseOp = iota // count an attempt and date its start
	leaseAck                   // ack, deleting the jobs
	leaseDone                  // ack, keeping the jobs as done
	leaseExtend                // move the lease expiry
)

// leaseQueries names each leaseOp's statements: the change of many jobs
// (the dialect's way of passing leases), the same matching each (id,
// token) pair in SQL (SQLite), and by primary key once the rows are
// locked (MySQL).
var leaseQueries = [...]struct{ many, pairs, byID query }{
	leaseStart:  {qStartLeases, qStartLeasesPairs, qStartByID},
	leaseAck:    {qAckLeases, qAckLeasesPairs, qAckByID},
	leaseDone:   {qDoneLeases, qDoneLeasesPairs, qDoneByID},
	leaseExtend: {qExtendLeases, qExtendLeasesPairs, qExtendByID},
}

// leaseChange is one change to the jobs under leases; extend is the
// lease a leaseExtend gives, from the time of its chunk.
type leaseChange struct {
	leases []queue.Lease
	op     leaseOp
	extend time.Duration
}

// args are the arguments of c's statements before the leases, at now.
func (c leaseChange) args(now int64) []any {
	switch c.op {
	case leaseStart, leaseDone:
		return []any{now, now}
	case leaseExtend:
		return []any{now + c.extend.Microseconds(), now}
	}
	return nil
}

// leaseStmt is one chunk of a leaseChange, for the dialect: its leases,
// its change and the arguments before the leases.
type leaseStmt struct {
	leases []queue.Lease
	op     leaseOp
	args   []any
}

// finish reports whether p acks its jobs (moves them from pending to
// done, or deletes them).
func (p leaseStmt) finish() bool { return p.op == leaseAck || p.op == leaseDone }

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
			parts = append(parts, leaseStmt{c.leases[start:min(start+maxChunkRows, len(c.leases))], c.op, c.args(now)})
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
func (q *Queue) finishByArrays(ctx context.Context, st statements, stmt query, leases []queue.Lease, now int64, args []any) (map[queue.Lease]bool, error) {
	done := make(map[queue.Lease]bool, len(leases))
	err := scanLeases(ctx, st, done, q.stmt(stmt), arrayArgs(leases, now, args)...)
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
