package sqlqueue

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	return q.reserve(ctx, queues, max, lease, claimCount{fresh: 1, recovered: 1})
}

// ReserveUnstarted is Reserve without counting the attempt (see
// queue.Queue): the claim leaves attempts as stored, and Complete's starts
// count it.
func (q *Queue) ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, claimCount{})
}

// ReserveStarting is Reserve counting the attempts of the jobs it hands
// out fresh and not of those taken back from an expired lease (see
// queue.Queue): one claim statement whose attempts column adds either.
func (q *Queue) ReserveStarting(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, claimCount{fresh: 1})
}

// claimCount is what a claim adds to the attempts of the jobs it takes:
// fresh to a job with no lease before it, recovered to one taken back from
// an expired lease (queue.Job.Recovered).
type claimCount struct{ fresh, recovered int }

// of returns what the claim adds to a job, recovered or not.
func (c claimCount) of(recovered bool) int {
	if recovered {
		return c.recovered
	}
	return c.fresh
}

// reserve is Reserve, adding inc to each claimed job's attempts.
func (q *Queue) reserve(ctx context.Context, queues []string, max int, lease time.Duration, inc claimCount) ([]queue.Job, error) {
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
	q.countClaim()
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

// selectThenClaim is the claim as reads then an update by key, inside
// the caller's write transaction ex (MySQL, SQLite): qClaimSelect reads
// the ready jobs of the queues not paused one priority at a time, highest
// first (byPriority), locking them where the dialect locks rows, until it
// has max of them or no priority is left; qClaimUpdate then leases them
// by keyOf, the column the dialect finds rows by.
//
// One read per priority is what keeps a claim's cost flat however many
// jobs are scheduled ahead: the claim index is (queue, priority, run_at,
// seq), so with the priority fixed, run_at <= now ends the range at the
// last due job. Over every priority at once (ORDER BY priority DESC,
// run_at, seq) the bound could not end the scan: a claim that found
// fewer due jobs than it asked for (the end of a backlog, every poll of
// an idle queue) read every scheduled entry of its queue, and jobs
// scheduled at a higher priority were read by every claim.
// Each read asks only for the jobs still missing, so the priorities
// share the limit, and a priority that gives fewer (its due jobs taken,
// or held by another claim's locks) leaves the rest to the next.
func (q *Queue) selectThenClaim(ctx context.Context, ex execer, queues []string, max int, now, expires time.Time, token string, inc claimCount, keyOf func(r row) any) ([]row, error) {
	st := stmts(ex)
	queues, err := q.unpaused(ctx, st, queues)
	if err != nil || len(queues) == 0 {
		return nil, err
	}
	// A claim of one queue reads its cursor's priority from the cursor
	// on (qClaimSelectFrom; see claimCursors), where the dialect has the
	// statement (MySQL/MariaDB; SQLite's claim ran 5% slower with it, run
	// BA: its leased rows cost a claim little to pass). When it comes back
	// short, that priority is read up to the cursor too (qClaimSelectTo),
	// where jobs may have become claimable since: the rows the reads above
	// locked or took are past the cursor, so none is read twice.
	// scanRows has closed the rows when it returns, so the next read and
	// the update below can run on the same connection.
	cursors := q.qs.in[qClaimSelectFrom] != ""
	var from *claimCursor
	if cursors {
		from = q.cursors.follow(queues, now)
	}
	var got []row
	err = q.byPriority(ctx, st, queues, func(prio int64, below bool) (bool, error) {
		stmt, args := qClaimSelect, append(queueArgs(queues), prio, micros(now), micros(now))
		switch {
		case below:
			stmt = qClaimSelectBelow
		case from != nil && prio == int64(from.priority):
			stmt, args = qClaimSelectFrom, append(args, from.runAt, from.runAt, from.seq)
		}
		rows, err := q.scanRows(ctx, st, q.stmtN(stmt, len(queues)), append(args, max-len(got)))
		got = append(got, rows...)
		return len(got) >= max, err
	})
	if err == nil && from != nil && len(got) < max {
		var rows []row
		rows, err = q.scanRows(ctx, st, q.stmtN(qClaimSelectTo, len(queues)),
			append(queueArgs(queues), from.priority, min(micros(now), from.runAt), micros(now), from.runAt, from.seq, max-len(got)))
		if len(rows) > 0 {
			got = append(got, rows...)
			slices.SortStableFunc(got, claimOrder)
		}
	}
	if err != nil {
		return nil, err
	}
	if cursors {
		q.cursors.settle(queues, max, got, from, now)
	}
	if len(got) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 7+len(got))
	args = append(args, inc.fresh, inc.recovered, token, micros(expires), micros(now), micros(now), queue.WorkerOf(ctx))
	for _, r := range got {
		args = append(args, keyOf(r))
	}
	if _, err := ex.ExecContext(ctx, q.stmtN(qClaimUpdate, len(got)), args...); err != nil {
		return nil, err
	}
	for i := range got {
		r := &got[i]
		r.job.Recovered = r.job.LeaseToken != "" // its last lease expired
		r.job.Attempts += inc.of(r.job.Recovered)
		r.job.LeaseToken = token + "-" + strconv.FormatInt(r.seq, 10)
		r.job.LeaseExpiresAt = expires
		r.runAt, r.updatedAt = micros(expires), micros(now)
	}
	return got, nil
}

// byPriority calls step with each priority of the pending jobs of
// queues, highest first, until step reports it is done: step(p, false)
// stands for the jobs of priority p. The priorities come from a loose
// scan of the claim index, one seek per queue and priority (qClaimTop,
// then qClaimNext below the last priority stepped), so jobs of a priority
// are never read to find the next one. After maxPriorities priorities
// the last call is step(p, true), standing for every priority up to p:
// a queue whose jobs have hundreds of distinct priorities costs a
// bounded number of statements, as a claim over every priority did.
func (q *Queue) byPriority(ctx context.Context, st statements, queues []string, step func(prio int64, below bool) (bool, error)) error {
	heads := make([]int64, len(queues)) // each queue's next priority
	has := make([]bool, len(queues))    // whether it has one
	seek := func(i int, args ...any) error {
		stmt := qClaimTop
		if len(args) > 1 {
			stmt = qClaimNext
		}
		err := queryRow(ctx, st, q.stmt(stmt), args, &heads[i])
		has[i] = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	for i, name := range queues {
		if err := seek(i, name); err != nil {
			return err
		}
	}
	for n := 1; ; n++ {
		found, prio := false, int64(0)
		for i := range queues {
			if has[i] && (!found || heads[i] > prio) {
				found, prio = true, heads[i]
			}
		}
		if !found {
			return nil
		}
		below := n > maxPriorities
		if done, err := step(prio, below); err != nil || done || below {
			return err
		}
		for i, name := range queues {
			if has[i] && heads[i] == prio {
				if err := seek(i, name, prio); err != nil {
					return err
				}
			}
		}
	}
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

// reads returns the statements for one statement outside a transaction
// whose cost per call matters (a claim, a batch ack's returned leases, a
// push): the driver's own client when the registration package gave one
// (hook.Queue.Direct), else the DB.
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

// Complete counts the attempts of the jobs under starts and records the
// outcomes of outs (see queue.Queue.Complete), in three parts:
//
//   - the start marks and the plain acks (done, nothing pushed, no batch)
//     in one statement or one short transaction per chunk of leases
//     (changeLeases); its failure fails the call as a whole;
//   - every other outcome but a batch member's (retries, dead letters,
//     snoozes, cancels, chain steps with their pushes) in one write
//     transaction, one lease-guarded statement each; should that
//     transaction fail, each of them is tried again in a transaction of
//     its own, so that one refused outcome (its reason text, say) costs
//     the others nothing;
//   - each batch member's outcome in a transaction of its own
//     (completeMember), since batch transactions take their locks in an
//     order of their own, and each graph node's likewise (completeNode).
//
// Buffered run metrics are written with it when due.
func (q *Queue) Complete(ctx context.Context, starts []queue.Lease, outs []queue.Completion) ([]queue.Lease, []error, error) {
	if err := q.use(ctx); err != nil {
		return nil, nil, err
	}
	errs := make([]error, len(outs))
	var acks []queue.Lease
	var ackAt, rest, members, nodes []int
	for i, o := range outs {
		finishes := o.Outcome == queue.OutcomeDone || o.Outcome == queue.OutcomeFailed || o.Outcome == queue.OutcomeCancelled
		switch {
		case o.Graph != "" && finishes:
			nodes = append(nodes, i)
		case o.Batch != "" && finishes:
			members = append(members, i)
		case releasesSequence(o):
			rest = append(rest, i) // completeOne passes its sequence on
		case o.Outcome == queue.OutcomeDone && len(o.Push) == 0 && o.Result == nil:
			acks = append(acks, o.Lease)
			ackAt = append(ackAt, i)
		default:
			rest = append(rest, i)
		}
	}
	var lostStarts []queue.Lease
	if len(starts) > 0 || len(acks) > 0 {
		lost, err := q.changeLeases(ctx, "starting and completing",
			leaseChange{leases: starts, op: leaseStart},
			q.ackChange(acks))
		if err != nil {
			return nil, nil, err
		}
		lostStarts = lost[0]
		if len(lost[1]) > 0 {
			gone := make(map[queue.Lease]bool, len(lost[1]))
			for _, l := range lost[1] {
				gone[l] = true
			}
			for _, i := range ackAt {
				if gone[outs[i].Lease] {
					errs[i] = fmt.Errorf("sqlqueue: acking job %s: %w", outs[i].Lease.JobID, queue.ErrLeaseLost)
				}
			}
		}
		q.countAcked(len(acks) - len(lost[1]))
	}
	if len(rest) > 0 {
		q.completeRest(ctx, outs, rest, errs)
	}
	for _, i := range members {
		o := outs[i]
		errs[i] = q.completeMember(ctx, o)
	}
	for _, i := range nodes {
		errs[i] = q.completeNode(ctx, outs[i])
	}
	return lostStarts, errs, nil
}

// completeRest records the outcomes outs[i] of each i of rest in one write
// transaction, or, should it fail, each in a transaction of its own,
// setting errs[i].
func (q *Queue) completeRest(ctx context.Context, outs []queue.Completion, rest []int, errs []error) {
	for _, i := range rest {
		if err := queue.ValidateBatch(outs[i].Push); err != nil {
			errs[i] = err
		}
	}
	var pushed []queue.Job
	var stored []bool
	err := q.againOnConflict(ctx, func() error {
		pushed, stored = pushed[:0], stored[:0]
		return q.d.writeTx(ctx, q, func(ex execer) error {
			st := stmts(ex)
			for _, i := range rest {
				if errs[i] != nil && !errors.Is(errs[i], errLeaseGone) {
					continue // refused before the transaction
				}
				errs[i] = nil
				s, err := q.completeOne(ctx, st, outs[i])
				if errors.Is(err, errLeaseGone) {
					errs[i] = err
					continue
				}
				if err != nil {
					return err
				}
				pushed, stored = append(pushed, outs[i].Push...), append(stored, s...)
			}
			return nil
		})
	})
	if err != nil {
		// One at a time, each its own transaction.
		pushed, stored = nil, nil
		for _, i := range rest {
			if errs[i] != nil && !errors.Is(errs[i], errLeaseGone) {
				continue
			}
			var s []bool
			errs[i] = q.againOnConflict(ctx, func() error {
				return q.d.writeTx(ctx, q, func(ex execer) error {
					var err error
					s, err = q.completeOne(ctx, stmts(ex), outs[i])
					return err
				})
			})
			if errs[i] == nil {
				pushed, stored = append(pushed, outs[i].Push...), append(stored, s...)
			}
		}
	}
	for _, i := range rest {
		o := outs[i]
		switch {
		case errors.Is(errs[i], errLeaseGone):
			errs[i] = fmt.Errorf("sqlqueue: completing job %s as %s: %w", o.Lease.JobID, o.Outcome, queue.ErrLeaseLost)
		case errs[i] != nil:
			var verr *queue.ValidationError
			if !errors.As(errs[i], &verr) {
				errs[i] = q.wrap(ctx, errs[i], "completing job %s as %s", o.Lease.JobID, o.Outcome)
			}
		case o.Outcome == queue.OutcomeRetried || o.Outcome == queue.OutcomeSnoozed:
			q.wake.at(q.againAt(o.At))
		case releasesSequence(o):
			q.wake.signal() // the sequence's next member may be claimable now
		}
	}
	if len(pushed) > 0 {
		q.wakeFor(pushed, stored)
	}
}

// againAt is when a job released for at runs again: at, or now if at is
// zero or past.
func (q *Queue) againAt(at time.Time) time.Time {
	if now := time.Now(); at.Before(now) {
		return now
	}
	return at
}

// completeOne records the outcome o, not a batch member's, on st, and
// pushes o.Push after it; it returns errLeaseGone, having changed
// nothing, when o's lease is not current, and which pushed jobs were
// stored.
func (q *Queue) completeOne(ctx context.Context, st statements, o queue.Completion) ([]bool, error) {
	nowT := time.Now()
	now := micros(nowT)
	var stmt query
	var args []any
	switch o.Outcome {
	case queue.OutcomeDone, queue.OutcomeFailed, queue.OutcomeCancelled:
		stmt, args, _ = q.finishQuery(o.Outcome, o.Reason, o.MaxAttempts, now)
	case queue.OutcomeRetried:
		at := micros(q.againAt(o.At))
		stmt, args = qRetryLeased, []any{now, historyError(o.Reason), at, at, o.Reason, now}
	case queue.OutcomeSnoozed:
		inc := 0
		if o.Counted {
			inc = 1
		}
		at := micros(q.againAt(o.At))
		stmt, args = qSnoozeLeased, []any{inc, at, at, now}
	default:
		return nil, fmt.Errorf("unknown outcome %d", o.Outcome)
	}
	n, err := q.execLeased(ctx, st, stmt, o.Lease, now, args...)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errLeaseGone
	}
	if o.Outcome == queue.OutcomeDone {
		if err := q.keepResult(ctx, st, o, nowT, false); err != nil {
			return nil, err
		}
	}
	if releasesSequence(o) {
		if err := q.completeSequence(ctx, st, o); err != nil {
			return nil, err
		}
	}
	if len(o.Push) == 0 {
		return nil, nil
	}
	return q.pushMany(ctx, st, true, o.Push)
}

// errLeaseGone ends a transaction of Complete whose lease was not
// current, rolling it back.
var errLeaseGone = errors.New("lease not current")

// finishQuery is the lease-guarded statement (see execLeased) that ends
// the job under a lease with outcome o at now, and its arguments before
// the lease's: OutcomeDone deletes it (or keeps it as done under
// WithRetention), OutcomeFailed dead-letters it with reason, recorded in
// its attempt history as a retry records it and limit, when above 0, as
// its max_attempts (the attempt limit that applied), and OutcomeCancelled
// cancels it. Any other outcome gives false.
func (q *Queue) finishQuery(o queue.Outcome, reason string, limit int, now int64) (query, []any, bool) {
	switch o {
	case queue.OutcomeDone:
		stmt, args := q.ackQuery(now)
		return stmt, args, true
	case queue.OutcomeFailed:
		return qDeadLeased, []any{now, historyError(reason), reason, now, now, limit}, true
	case queue.OutcomeCancelled:
		return qCancelLeased, []any{queue.ErrCancelled.Error(), now, now}, true
	}
	return 0, nil, false
}

// vacuumAfterAcks is how many jobs this Queue acks between two background
// checks of whether the jobs table needs a vacuum (dialect.vacuumIfDue).
// An acked row's index entries stay in the claim index until a vacuum
// removes them, and every claim walks past them: where autovacuum is off,
// or lags behind a fast burn-down, the claim's cost grows with the jobs
// done since the last vacuum, while the maintenance pass checks only once
// per interval; vacuums during a long burn-down keep its claims short.
// A small queue never reaches this count, so tests never vacuum.
const vacuumAfterAcks = 100_000

// vacuumAfterWalk bounds the dead claim index entries this Queue's claims
// walk, by estimate, between two background checks: each claim adds the
// jobs this Queue acked since the last check, whose entries a claim reads
// past before the live ones. A burn-down's claims of a thousand jobs reach
// it about when they reach vacuumAfterAcks; at a low rate, where each job
// is claimed on its own, it starts a check every few thousand acks
// instead of every 100,000, so that a claim does not read a thousand
// index pages for one job (run AP: 0.66 ms and 1,162 buffers per claim at
// 1,000 jobs/s without it, about half the server's time).
const vacuumAfterWalk = 4_000_000

// vacuumWalkDeadRows and vacuumWalkPerLive are the dead rows from which a
// check started by the walk vacuums: 1,000 or 1% of the live rows,
// whichever is more. Fewer than vacuumDeadRows on a small table, since it
// comes after fewer acks; above zero, so that a check after another
// process's vacuum (its statistics show the table clean) does not vacuum
// again. On a large table a vacuum costs more (every index is read), and
// there the claims walked little in run AP: a table holding jobs scheduled
// ahead or kept done rows kept its claim index clean without a vacuum
// (28-54 buffers per claim with 1,000,000 kept rows; the cause not
// established), so it waits for as many dead rows as the maintenance pass
// does.
const (
	vacuumWalkDeadRows = 1_000
	vacuumWalkPerLive  = 0.01
)

// vacuumBar is the dead rows from which a check vacuums: dead, or
// perLive times the table's live rows if more.
type vacuumBar struct {
	dead    int64
	perLive float64
}

// vacuumTimeout bounds one background vacuum.
const vacuumTimeout = 5 * time.Minute

// vacuumer runs the background vacuum checks of one Queue: at most one at
// a time, waited for by Close.
type vacuumer struct {
	// after, afterWalk and deadRows replace vacuumAfterAcks,
	// vacuumAfterWalk and vacuumDeadRows when not zero (tests; a negative
	// deadRows vacuums whatever the count).
	after, afterWalk, deadRows int64

	acked   atomic.Int64 // jobs acked since the last check
	walk    atomic.Int64 // the claims' estimated walk since the last check
	running atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	cancel  context.CancelFunc // of the running check; nil when none
	closed  bool
}

// countAcked counts n jobs acked and, every vacuumAfterAcks of them,
// starts a background check unless one is running.
func (q *Queue) countAcked(n int) {
	v := &q.vac
	after := int64(vacuumAfterAcks)
	if v.after > 0 {
		after = v.after
	}
	if n <= 0 || v.acked.Add(int64(n)) < after {
		return
	}
	q.checkVacuum(vacuumBar{dead: v.minDeadRows()})
}

// countClaim adds a claim's estimated walk over dead index entries (the
// jobs acked since the last check) and, once the walk reaches
// vacuumAfterWalk, starts a background check unless one is running.
func (q *Queue) countClaim() {
	v := &q.vac
	limit := int64(vacuumAfterWalk)
	if v.afterWalk > 0 {
		limit = v.afterWalk
	}
	acked := v.acked.Load()
	if acked == 0 || v.walk.Add(acked) < limit {
		return
	}
	bar := vacuumBar{vacuumWalkDeadRows, vacuumWalkPerLive}
	if v.deadRows < 0 {
		bar = vacuumBar{dead: v.deadRows}
	}
	q.checkVacuum(bar)
}

// checkVacuum starts a background check of whether the jobs table has
// the dead rows bar asks to vacuum, unless one is running or the Queue is
// closed, and starts the counts towards the next check afresh.
func (q *Queue) checkVacuum(bar vacuumBar) {
	v := &q.vac
	if !v.running.CompareAndSwap(false, true) {
		return
	}
	v.acked.Store(0)
	v.walk.Store(0)
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		v.running.Store(false)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), vacuumTimeout)
	v.cancel = cancel
	v.wg.Add(1)
	v.mu.Unlock()
	go func() {
		defer v.wg.Done()
		defer v.running.Store(false)
		defer cancel()
		if err := q.d.vacuumIfDue(ctx, q, bar); err != nil && ctx.Err() == nil {
			q.log.Warn("sqlqueue: vacuuming the jobs table after many acks failed; the maintenance pass tries again", "table", q.t.raw, "err", err)
		}
	}()
}

// minDeadRows returns the dead rows from which the maintenance pass and a
// check after vacuumAfterAcks vacuum.
func (v *vacuumer) minDeadRows() int64 {
	if v.deadRows != 0 {
		return v.deadRows
	}
	return vacuumDeadRows
}

// closeVacuum stops a running background check and waits for it.
func (q *Queue) closeVacuum() {
	v := &q.vac
	v.mu.Lock()
	v.closed = true
	if v.cancel != nil {
		v.cancel()
	}
	v.mu.Unlock()
	v.wg.Wait()
}

// maxMetricKeys bounds the buffer of unflushed metrics (queues x job
// names x minutes and hours) while the database is unreachable; records
// beyond it are dropped.
const maxMetricKeys = 10000

// The periods of the metrics rows (span_s), and how long each is kept.
const (
	minuteSpan = 60
	hourSpan   = 3600
	minuteKeep = 24 * time.Hour
)

type metricKey struct {
	span  int64 // minuteSpan or hourSpan
	at    int64 // Unix seconds of the period's start
	queue string
	name  string
}

// metricKeyCmp orders keys as the table's primary key, so that two
// processes' flushes lock shared rows in the same order.
func metricKeyCmp(a, b metricKey) int {
	return cmp.Or(cmp.Compare(a.span, b.span), cmp.Compare(a.at, b.at), cmp.Compare(a.queue, b.queue), cmp.Compare(a.name, b.name))
}

// metricsBuffer aggregates run records per queue, job name and minute
// (and hour) until a flush writes them.
type metricsBuffer struct {
	mu        sync.Mutex
	m         map[metricKey]*queue.MetricPoint
	lastFlush time.Time
	flushes   int // flushes that wrote rows, for tests
}

func (b *metricsBuffer) addLocked(k metricKey, p queue.MetricPoint) {
	if b.m == nil {
		b.m = make(map[metricKey]*queue.MetricPoint)
	}
	cur := b.m[k]
	if cur == nil {
		if len(b.m) >= maxMetricKeys {
			return
		}
		cur = &queue.MetricPoint{}
		b.m[k] = cur
	}
	cur.Add(p)
}

// ObserveRun records one finished attempt for the run metrics. It only
// buffers in memory, adding to the points of the attempt's queue, job
// name, minute and hour (two map updates under a mutex; no I/O). The
// process's next heartbeat at least a second after the previous flush
// writes the buffer in one transaction, as do FlushMetrics and Close: no
// job's ack waits for it. Safe for concurrent use.
func (q *Queue) ObserveRun(r queue.RunRecord) {
	start := r.Start
	if start.IsZero() {
		start = time.Now()
	}
	name := r.Queue
	if name == "" {
		name = queue.DefaultQueue
	}
	var p queue.MetricPoint
	p.Observe(r)
	at := start.Unix()
	q.metrics.mu.Lock()
	q.metrics.addLocked(metricKey{span: minuteSpan, at: at - mod(at, minuteSpan), queue: name, name: r.Name}, p)
	q.metrics.addLocked(metricKey{span: hourSpan, at: at - mod(at, hourSpan), queue: name, name: r.Name}, p)
	q.metrics.mu.Unlock()
}

// mod is a modulo that is never negative.
func mod(a, b int64) int64 { return ((a % b) + b) % b }

// flushMetricsIfDue flushes the buffer if it holds records and the last
// flush is at least a second old. A failed flush keeps the records for the
// next one and does not fail the call that triggered it.
func (q *Queue) flushMetricsIfDue(ctx context.Context) {
	q.metrics.mu.Lock()
	due := len(q.metrics.m) > 0 && time.Since(q.metrics.lastFlush) >= q.cfg.metricsFlushIn
	q.metrics.mu.Unlock()
	if due {
		q.flushMetricsLogged(ctx)
	}
}

// FlushMetrics writes the buffered run metrics now, in one transaction
// that adds them to the rows of the <table>_run_metrics table (one upsert
// per queue, job name and minute, and per hour). On error the records
// stay buffered for the next flush.
func (q *Queue) FlushMetrics(ctx context.Context) error {
	q.metrics.mu.Lock()
	batch := q.metrics.m
	q.metrics.m = nil
	q.metrics.lastFlush = time.Now()
	q.metrics.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := q.use(ctx); err != nil {
		q.restoreMetrics(batch)
		return err
	}
	keys := slices.SortedFunc(maps.Keys(batch), metricKeyCmp)
	upsert := q.stmt(qMetricsUpsert)
	err := q.againOnConflict(ctx, func() error {
		return q.d.writeTx(ctx, q, func(ex execer) error {
			for _, k := range keys {
				p := batch[k]
				args := make([]any, 0, 9+queue.RuntimeBuckets)
				args = append(args, k.span, k.at, k.queue, k.name, p.Processed, p.Failed,
					p.TotalRuntime.Microseconds(), p.MaxRuntime.Microseconds(), p.TotalWait.Microseconds())
				for _, c := range p.Runtimes {
					args = append(args, c)
				}
				if _, err := ex.ExecContext(ctx, upsert, args...); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		q.restoreMetrics(batch)
		return q.wrap(ctx, err, "writing run metrics")
	}
	q.metrics.mu.Lock()
	q.metrics.flushes++
	q.metrics.mu.Unlock()
	return nil
}

// flushMetricsLogged flushes the buffer for a call that does not fail on a
// failed flush; the records stay buffered and the error is logged.
func (q *Queue) flushMetricsLogged(ctx context.Context) {
	if err := q.FlushMetrics(ctx); err != nil && ctx.Err() == nil {
		q.log.Warn("sqlqueue: writing run metrics failed; kept for the next flush", "table", q.t.raw, "err", err)
	}
}

func (q *Queue) restoreMetrics(batch map[metricKey]*queue.MetricPoint) {
	q.metrics.mu.Lock()
	defer q.metrics.mu.Unlock()
	for k, a := range batch {
		q.metrics.addLocked(k, *a)
	}
}

// Metrics returns the per-minute points by queue and job name from since
// (rounded down to its minute, at most a day back: older minutes are
// pruned) to now, oldest first, at most 100,000 of them. It flushes this
// process's buffered records first so they are included.
func (q *Queue) Metrics(ctx context.Context, since time.Time) ([]queue.MetricPoint, error) {
	return q.readMetrics(ctx, minuteSpan, since)
}

// HourlyMetrics returns the hourly points by queue and job name from
// since (rounded down to its hour, at most queue.MetricsRetention back)
// to now, oldest first, at most 100,000 of them, with this process's
// buffered records flushed first.
func (q *Queue) HourlyMetrics(ctx context.Context, since time.Time) ([]queue.MetricPoint, error) {
	return q.readMetrics(ctx, hourSpan, since)
}

// readMetrics reads the points of span seconds from since's period on.
func (q *Queue) readMetrics(ctx context.Context, span int64, since time.Time) ([]queue.MetricPoint, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	q.flushMetricsLogged(ctx)
	from := since.Unix()
	rs, err := q.readDB().QueryContext(ctx, q.stmt(qMetrics), span, from-mod(from, span))
	if err != nil {
		return nil, q.wrap(ctx, err, "reading metrics")
	}
	defer rs.Close()
	var out []queue.MetricPoint
	for rs.Next() {
		var p queue.MetricPoint
		var at, runtime, runtimeMax, wait int64
		dest := []any{&p.Queue, &p.Name, &at, &p.Processed, &p.Failed, &runtime, &runtimeMax, &wait}
		for i := range p.Runtimes {
			dest = append(dest, &p.Runtimes[i])
		}
		if err := rs.Scan(dest...); err != nil {
			return nil, q.wrap(ctx, err, "reading metrics")
		}
		p.Minute = time.Unix(at, 0).UTC()
		p.TotalRuntime = time.Duration(runtime) * time.Microsecond
		p.MaxRuntime = time.Duration(runtimeMax) * time.Microsecond
		p.TotalWait = time.Duration(wait) * time.Microsecond
		out = append(out, p)
	}
	if err := rs.Err(); err != nil {
		return nil, q.wrap(ctx, err, "reading metrics")
	}
	return out, nil
}
