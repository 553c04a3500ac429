package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Cancel cancels the active job id (see queue.Canceller): one change to
// state 'cancelled' in a short write transaction, which frees its unique
// key. A running job keeps its lease token, so the worker that holds it
// finds it through CancelledSince; its lease is lost at once, since every
// lease-guarded statement requires state 'pending'. The cancelled job is
// kept, and pruned, like a done one (WithRetention). A batch member is
// counted as cancelled in its batch in the same transaction, which pushes
// the batch's callbacks that this makes due; a graph's node is cancelled
// in its graph, with its waiting dependants.
func (q *Queue) Cancel(ctx context.Context, id string) (queue.JobState, error) {
	if err := q.use(ctx); err != nil {
		return "", err
	}
	now := time.Now()
	var was queue.JobState
	var pushed []queue.Job
	var sequenced bool // a sequence member: its next may be claimable
	err := q.againOnConflict(ctx, func() error {
		return q.d.writeTx(ctx, q, func(ex execer) error {
			st := stmts(ex)
			rows, err := q.scanRows(ctx, st, q.stmt(qJob), []any{id})
			switch {
			case err != nil:
				return err
			case len(rows) == 0:
				return queue.ErrNotFound
			case rows[0].state != statePending && rows[0].state != stateGrouped && rows[0].state != stateSequenced:
				return queue.ErrFinished
			}
			was = rows[0].info(micros(now)).State
			// A member's row before the job's (the lock order of batch.go).
			batch := rows[0].job.Meta[queue.MetaBatch]
			var member int64
			if batch != "" {
				if member, err = st.Exec(ctx, q.stmt(qMemberCancel), batch, id); err != nil {
					return err
				}
			}
			// A graph node's row, and its dependants', before the job's
			// (the lock order of graph.go).
			if g := rows[0].job.Meta[queue.MetaGraph]; g != "" {
				if err := q.cancelNode(ctx, st, g, id); err != nil {
					return err
				}
			}
			n, err := st.Exec(ctx, q.stmt(qCancelJob), micros(now), micros(now), queue.ErrCancelled.Error(), id)
			if err != nil {
				return err
			}
			if n == 0 {
				return queue.ErrFinished
			}
			if rows[0].job.Meta[queue.MetaSequence] != "" {
				if _, err := q.seqLeave(ctx, st, []string{id}); err != nil {
					return err
				}
				sequenced = true
			}
			if member == 0 {
				return nil
			}
			if err := q.countBatch(ctx, st, batch, [3]int64{0, 0, 1}, micros(now)); err != nil {
				return err
			}
			pushed, err = q.fireDue(ctx, st, batch, micros(now), "", "")
			return err
		})
	})
	if errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrFinished) {
		return "", fmt.Errorf("sqlqueue: cancelling job %s: %w", id, err)
	}
	if err != nil {
		return "", q.wrap(ctx, err, "cancelling job %s", id)
	}
	if len(pushed) > 0 {
		q.wakeFor(pushed, allStored(pushed))
	}
	if sequenced {
		q.wake.signal()
	}
	return was, nil
}

// CancelledSince returns the leases of jobs cancelled while they ran, at
// or after since (see queue.Canceller): one range of the list index
// (state, queue, finished_at, seq) per queue with cancelled jobs (from the
// counts table), in one statement of UNION ALL per unionProbes queues.
func (q *Queue) CancelledSince(ctx context.Context, since time.Time) ([]queue.Lease, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	st := stmts(q.db)
	names, _, err := q.finishedQueues(ctx, st, stateCancelled)
	set := make(map[queue.Lease]bool)
	for len(names) > 0 && err == nil {
		part := names[:min(len(names), unionProbes)]
		names = names[len(part):]
		query, args := q.cancelledQuery(micros(since), part)
		err = scanLeases(ctx, st, set, query, args...)
	}
	if err != nil {
		return nil, q.wrap(ctx, err, "listing cancelled jobs")
	}
	out := make([]queue.Lease, 0, len(set))
	for l := range set {
		out = append(out, l)
	}
	return out, nil
}

// leaseRow is the meta row of the named lease (see AcquireLease).
func leaseRow(name string) string { return "lease:" + name }

// AcquireLease takes or renews the named lease for holder until now plus
// ttl (see queue.Leaser): a row of <table>_meta with the holder, the
// expiry and the epoch, changed by one conditional statement. Names are at
// most queue.MaxLeaseNameBytes bytes.
func (q *Queue) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := q.use(ctx); err != nil {
		return false, err
	}
	if err := queue.ValidateLeaseName(name); err != nil {
		return false, err
	}
	ok, err := q.acquireRow(ctx, stmts(q.db), leaseRow(name), holder, ttl, true)
	if err != nil {
		return false, q.wrap(ctx, err, "acquiring lease %s", name)
	}
	return ok, nil
}

// AcquireLeaseEpoch is AcquireLease that also returns the lease's epoch
// (see queue.Leaser): the change and a read of the epoch in one write
// transaction.
func (q *Queue) AcquireLeaseEpoch(ctx context.Context, name, holder string, ttl time.Duration) (int64, bool, error) {
	if err := q.use(ctx); err != nil {
		return 0, false, err
	}
	if err := queue.ValidateLeaseName(name); err != nil {
		return 0, false, err
	}
	epoch, held, err := q.acquireEpoch(ctx, leaseRow(name), holder, ttl, true)
	if err != nil {
		return 0, false, q.wrap(ctx, err, "acquiring lease %s", name)
	}
	return epoch, held, nil
}

// acquireEpoch takes or renews the lease in the meta row name, as
// acquireRow does, and returns its epoch when held.
func (q *Queue) acquireEpoch(ctx context.Context, name, holder string, ttl time.Duration, create bool) (epoch int64, held bool, err error) {
	err = q.d.writeTx(ctx, q, func(ex execer) error {
		st := stmts(ex)
		held, err = q.acquireRow(ctx, st, name, holder, ttl, create)
		if err != nil || !held {
			return err
		}
		return queryRow(ctx, st, q.stmt(qLeaseEpoch), []any{name}, &epoch)
	})
	if err != nil || !held {
		return 0, false, err
	}
	return epoch, true, nil
}

// maxKnownLeaseRows bounds Queue.leaseRows.
const maxKnownLeaseRows = 10000

// acquireRow takes or renews the lease in the meta row name on st; create
// adds the row when it is missing. The epoch grows unless holder renews
// the lease it holds live; it is assigned first because MySQL evaluates
// the assignments of a change left to right, each seeing the ones before.
func (q *Queue) acquireRow(ctx context.Context, st statements, name, holder string, ttl time.Duration, create bool) (bool, error) {
	if _, known := q.leaseRows.Load(name); create && !known {
		if _, err := st.Exec(ctx, q.stmt(qLeaseRowInsert), name); err != nil {
			return false, err
		}
		if q.leaseRowCount.Load() < maxKnownLeaseRows {
			q.leaseRowCount.Add(1)
			q.leaseRows.Store(name, struct{}{})
		}
	}
	now := time.Now()
	// The expiry always moves (MySQL counts changed rows, not matched
	// ones), so a renewal by the holder reports one row.
	exp, at := micros(now.Add(ttl)), micros(now)
	n, err := st.Exec(ctx, q.stmt(qLeaseAcquire),
		holder, at, holder, exp, exp, name, holder, at)
	return n == 1, err
}

// fenced returns an error matching queue.ErrFenced when ctx carries a
// Fence (queue.WithFence) whose epoch is no longer its lease's, reading
// the lease's row on st, a write transaction, with a lock that keeps the
// lease from passing on until the transaction ends.
func (q *Queue) fenced(ctx context.Context, st statements) error {
	f, ok := queue.FenceFrom(ctx)
	if !ok {
		return nil
	}
	return q.fencedRow(ctx, st, leaseRow(f.Lease), f)
}

// fencedRow is fenced for the lease in meta row name.
func (q *Queue) fencedRow(ctx context.Context, st statements, name string, f queue.Fence) error {
	var epoch int64
	err := queryRow(ctx, st, q.stmt(qLeaseEpochLocked), []any{name}, &epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if epoch != f.Epoch {
		return fmt.Errorf("lease %s is past epoch %d: %w", f.Lease, f.Epoch, queue.ErrFenced)
	}
	return nil
}

// ReleaseLease gives up the named lease if holder holds it.
func (q *Queue) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	_, err := q.db.ExecContext(ctx, q.stmt(qLeaseRelease), leaseRow(name), holder)
	return q.wrap(ctx, err, "releasing lease %s", name)
}

// RegisterPeriodic creates or refreshes the record of a periodic job (see
// queue.PeriodicStore).
func (q *Queue) RegisterPeriodic(ctx context.Context, p queue.PeriodicInfo) (time.Time, error) {
	if err := q.use(ctx); err != nil {
		return time.Time{}, err
	}
	now := micros(time.Now())
	var last int64
	err := q.d.writeTx(ctx, q, func(ex execer) error {
		st := stmts(ex)
		tpl := p.Template
		if tpl == nil {
			tpl = []byte{}
		}
		if _, err := st.Exec(ctx, q.stmt(qPeriodicInsert), p.Name, p.Schedule, micros(p.LastTick), micros(p.NextTick), now, tpl); err != nil {
			return err
		}
		if _, err := st.Exec(ctx, q.stmt(qPeriodicUpdate),
			p.Schedule, micros(p.NextTick), now, tpl, p.Name); err != nil {
			return err
		}
		return queryRow(ctx, st, q.stmt(qPeriodicLastTick), []any{p.Name}, &last)
	})
	if err != nil {
		return time.Time{}, q.wrap(ctx, err, "registering periodic job %s", p.Name)
	}
	return fromMicros(last), nil
}

// ClaimTick records a periodic job's tick and pushes its job in one write
// transaction (see queue.PeriodicStore).
func (q *Queue) ClaimTick(ctx context.Context, p queue.PeriodicInfo, j queue.Job) (bool, error) {
	if err := queue.Validate(j); err != nil {
		return false, err
	}
	if err := q.use(ctx); err != nil {
		return false, err
	}
	if j.ID == "" {
		j.ID = queue.NewID()
	}
	now := micros(time.Now())
	claimed := false
	var stored []bool
	err := q.d.writeTx(ctx, q, func(ex execer) error {
		st := stmts(ex)
		if err := q.fenced(ctx, st); err != nil {
			return err
		}
		n, err := st.Exec(ctx, q.stmt(qPeriodicTick),
			micros(p.LastTick), micros(p.NextTick), p.Schedule, j.ID, now, p.Name, micros(p.LastTick))
		if err != nil || n == 0 {
			return err
		}
		claimed = true
		stored, err = q.pushMany(ctx, st, true, []queue.Job{j})
		if err != nil || stored[0] {
			return err
		}
		_, err = st.Exec(ctx, q.stmt(qPeriodicClearJob), p.Name)
		return err
	})
	if err != nil {
		return false, q.wrap(ctx, err, "claiming a tick of periodic job %s", p.Name)
	}
	if claimed && stored[0] {
		q.wake.at(j.AvailableAt)
	}
	return claimed, nil
}

// PausePeriodic sets whether the periodic job name's ticks are claimed
// (see queue.Scheduler).
func (q *Queue) PausePeriodic(ctx context.Context, name string, paused bool) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	n, err := stmts(q.db).Exec(ctx, q.stmt(qPeriodicPause), paused, name)
	if err == nil && n == 0 {
		// MySQL counts the rows it changed, not those it matched: a
		// record already in that state changes none.
		var found int
		err = queryRow(ctx, stmts(q.db), q.stmt(qPeriodicExists), []any{name}, &found)
		if err == nil && found == 0 {
			return fmt.Errorf("sqlqueue: pausing periodic job %s: %w", name, queue.ErrNotFound)
		}
	}
	return q.wrap(ctx, err, "pausing periodic job %s", name)
}

// Periodics lists the records of periodic jobs, sorted by name.
func (q *Queue) Periodics(ctx context.Context) ([]queue.PeriodicInfo, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	rows, err := q.db.QueryContext(ctx, q.stmt(qPeriodicList))
	if err != nil {
		return nil, q.wrap(ctx, err, "listing periodic jobs")
	}
	defer func() { _ = rows.Close() }()
	var out []queue.PeriodicInfo
	for rows.Next() {
		var p queue.PeriodicInfo
		var last, next, seen int64
		var id sql.NullString
		if err := rows.Scan(&p.Name, &p.Schedule, &last, &next, &id, &p.Paused, &seen, &p.Template); err != nil {
			return nil, q.wrap(ctx, err, "listing periodic jobs")
		}
		p.LastTick, p.NextTick, p.LastJobID, p.Seen = fromMicros(last), fromMicros(next), id.String, fromMicros(seen)
		if len(p.Template) == 0 {
			p.Template = nil
		}
		out = append(out, p)
	}
	return out, q.wrap(ctx, rows.Err(), "listing periodic jobs")
}
