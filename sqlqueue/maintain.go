package sqlqueue

import (
	"context"
	"slices"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// maxPruneBatches bounds one maintenance pass per kind of row, so a pass
// after a long pause does not run for long; the next pass continues.
const maxPruneBatches = 20

// Maintain runs one maintenance pass if this process holds, or can take,
// the maintenance lease: a row in <table>_meta with a holder and an expiry
// (three maintenance intervals), so one process at a time prunes however
// many share the database. The leader deletes, in batches by primary key,
// finished (done and cancelled) jobs older than their retention, expired
// UniqueFor holds, dead letters older than theirs
// (WithRetention) and batches and graphs that finished as long ago, with
// their members' records and their nodes and edges, results past their
// time, workers not seen within the worker TTL, per-minute
// run metrics older than a day and hourly ones older than seven days
// (queue.MetricsRetention). Before that it marks finished the graphs whose
// last node has finished since the last pass, which starts their nodes'
// results' retention (see driver.Completion). On PostgreSQL it then vacuums and analyzes the jobs
// table when the server's statistics count at least 10,000 dead rows in
// it (the table's own autovacuum settings, from Setup, make autovacuum do
// so too where it is on). It reports whether this process was the leader
// and how many rows it deleted.
//
// The pass is fenced: the lease's epoch, read when it is taken, is checked
// in the transaction of each delete, so a process that paused during a
// pass (SIGSTOP) and resumes after another took the lease over deletes
// nothing more; and the pass ends, its context cancelled, a tenth of the
// lease before the lease's expiry. Folding the job counts and vacuuming
// are safe to run from several processes at once and are not fenced.
//
// Workers trigger a pass through Heartbeat once per maintenance interval,
// and an idle Worker's Wait starts one in the background when it is due,
// so a finished job is pruned within one maintenance interval of its
// retention however far apart the heartbeats are; call Maintain yourself (for example from a ticker) in deployments that
// run no Worker against the database.
func (q *Queue) Maintain(ctx context.Context) (leader bool, pruned int, err error) {
	if err := q.use(ctx); err != nil {
		return false, 0, err
	}
	now := time.Now()
	// The maintenance leader is a named lease like AcquireLease's, in the
	// row every schema version has had.
	ttl := 3 * q.cfg.maintainEvery
	epoch, held, err := q.acquireEpoch(ctx, maintenanceRow, q.holder, ttl, false)
	if err != nil || !held {
		return false, 0, q.wrap(ctx, err, "electing the maintenance leader")
	}
	ctx, cancel := context.WithDeadline(ctx, now.Add(ttl-ttl/10))
	defer cancel()
	ctx = queue.WithFence(ctx, queue.Fence{Lease: maintenanceRow, Epoch: epoch})
	finishedBefore := now.Add(-q.cfg.keepFinished)
	pruned, err = q.pruneJobs(ctx, stateDone, finishedBefore)
	if err == nil {
		var n int
		n, err = q.pruneJobs(ctx, stateCancelled, finishedBefore)
		pruned += n
	}
	if err == nil {
		var n int64
		n, err = q.fencedExec(ctx, qPruneUniques, micros(now))
		pruned += int(n)
	}
	if err == nil && q.cfg.keepDead > 0 {
		var n int
		n, err = q.pruneJobs(ctx, stateDead, now.Add(-q.cfg.keepDead))
		pruned += n
	}
	if err == nil && q.cfg.keepDead > 0 {
		var n int
		n, err = q.pruneBatches(ctx, now.Add(-q.cfg.keepDead))
		pruned += n
	}
	if err == nil {
		// Graphs that finished since the last pass are marked before
		// results are pruned: their nodes' results are then dated.
		_, err = q.finishGraphs(ctx, now)
	}
	if err == nil && q.cfg.keepDead > 0 {
		var n int
		n, err = q.pruneGraphs(ctx, now.Add(-q.cfg.keepDead))
		pruned += n
	}
	if err == nil {
		var n int64
		n, err = q.fencedExec(ctx, qPruneResults, micros(now))
		pruned += int(n)
	}
	if err == nil {
		var n int64
		n, err = q.fencedExec(ctx, qPruneWorkers, micros(now.Add(-q.cfg.workerTTL)))
		pruned += int(n)
	}
	if err == nil {
		var n int64
		n, err = q.fencedExec(ctx, qPruneFleet, micros(now.Add(-q.cfg.workerTTL)))
		pruned += int(n)
	}
	if err == nil {
		var n int64
		n, err = q.fencedExec(ctx, qPruneMetrics, minuteSpan, now.Add(-minuteKeep).Unix())
		pruned += int(n)
	}
	if err == nil {
		var n int64
		n, err = q.fencedExec(ctx, qPruneMetrics, hourSpan, now.Add(-q.cfg.metricsKeep).Unix())
		pruned += int(n)
	}
	if err != nil {
		return true, pruned, q.wrap(ctx, err, "pruning old rows")
	}
	if err := q.foldCounts(ctx); err != nil {
		return true, pruned, q.wrap(ctx, err, "folding the job counts")
	}
	if err := q.pruneScheduledCounts(ctx, now); err != nil {
		return true, pruned, q.wrap(ctx, err, "pruning the scheduled job counts")
	}
	n, err := q.d.pruneSearch(ctx, q)
	pruned += n
	if err != nil {
		return true, pruned, q.wrap(ctx, err, "pruning the search index")
	}
	if err := q.d.vacuumIfDue(ctx, q, vacuumBar{dead: q.vac.minDeadRows()}); err != nil {
		return true, pruned, q.wrap(ctx, err, "vacuuming the jobs table")
	}
	return true, pruned, nil
}

// pruneJobs deletes up to maxPruneBatches batches of at most pruneBatch
// jobs in state that finished before cutoff. It steps through the queues
// with such jobs (see finishedQueues) on the list index: each step reads,
// in one statement, the oldest jobs of up to unionProbes queues, pruneBatch
// split among them, and deletes them by primary key. A queue that had
// fewer than its share is done; one that had its share is probed again
// after the queues not probed yet. A step that finds nothing does not
// count as a batch, so every queue is probed at least once per pass
// (ceil(queues/unionProbes) statements when there is nothing to prune).
func (q *Queue) pruneJobs(ctx context.Context, state string, cutoff time.Time) (int, error) {
	st := stmts(q.db)
	open, _, err := q.finishedQueues(ctx, st, state)
	if err != nil {
		return 0, err
	}
	total, batches := 0, 0
	for len(open) > 0 && batches < maxPruneBatches {
		probe := open[:min(len(open), unionProbes)]
		lim := max(pruneBatch/len(probe), 1)
		sel, args := q.pruneQuery(state, micros(cutoff), probe, lim)
		rows, err := st.Query(ctx, sel, args...)
		if err != nil {
			return total, err
		}
		var ids []string
		found := make(map[string]int, len(probe))
		for rows.Next() {
			var id, name string
			if err := rows.Scan(&id, &name); err != nil {
				rows.Close()
				return total, err
			}
			ids = append(ids, id)
			found[name]++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return total, err
		}
		rest := slices.Clone(open[len(probe):])
		for _, name := range probe {
			if found[name] >= lim {
				rest = append(rest, name)
			}
		}
		open = rest
		if len(ids) == 0 {
			continue
		}
		batches++
		var n int64
		err = q.fencedTx(ctx, func(st statements) (err error) {
			if n, err = q.execIn(ctx, st, qDeleteInState, ids, state); err != nil || state != stateDead {
				return err
			}
			// A pruned dead head passes its sequence on.
			_, err = q.seqPassOn(ctx, st, ids, false)
			return err
		})
		if err != nil {
			return total, err
		}
		total += int(n)
	}
	return total, nil
}

// maintenanceRow is the meta row of the maintenance lease.
const maintenanceRow = "maintenance_leader"

// fencedTx runs fn in a write transaction that first checks the fence ctx
// carries (the maintenance pass's), on the maintenance lease's row, and
// runs it again from the start when the server rolled it back to break a
// deadlock.
func (q *Queue) fencedTx(ctx context.Context, fn func(st statements) error) error {
	f, fenced := queue.FenceFrom(ctx)
	return q.againOnConflict(ctx, func() error {
		return q.d.writeTx(ctx, q, func(ex execer) error {
			st := stmts(ex)
			if fenced {
				if err := q.fencedRow(ctx, st, f.Lease, f); err != nil {
					return err
				}
			}
			return fn(st)
		})
	})
}

// fencedExec runs one statement in a fencedTx and returns how many rows
// it changed.
func (q *Queue) fencedExec(ctx context.Context, stmt query, args ...any) (n int64, err error) {
	err = q.fencedTx(ctx, func(st statements) error {
		n, err = st.Exec(ctx, q.stmt(stmt), args...)
		return err
	})
	return n, err
}

// maintainIfDue runs Maintain when the last attempt from this Queue is at
// least one maintenance interval old.
func (q *Queue) maintainIfDue(ctx context.Context) {
	q.maintMu.Lock()
	due := time.Since(q.lastMaint) >= q.cfg.maintainEvery
	if due {
		q.lastMaint = time.Now()
	}
	q.maintMu.Unlock()
	if due {
		if _, _, err := q.Maintain(ctx); err != nil && ctx.Err() == nil {
			q.log.Warn("sqlqueue: maintenance pass failed; the next one retries", "table", q.t.raw, "err", err)
		}
	}
}

// maintainInBackground starts a maintenance pass on a goroutine of its
// own if one is due (as maintainIfDue) and the Queue is not closing.
func (q *Queue) maintainInBackground() {
	q.maintMu.Lock()
	defer q.maintMu.Unlock()
	bg := &q.maintBG
	if bg.closed || bg.running || time.Since(q.lastMaint) < q.cfg.maintainEvery {
		return
	}
	q.lastMaint = time.Now()
	// The pass bounds itself to its lease (Maintain); this only stops it
	// at Close.
	ctx, cancel := context.WithCancel(context.Background())
	bg.cancel, bg.running = cancel, true
	bg.wg.Add(1)
	go func() {
		defer bg.wg.Done()
		defer func() {
			cancel()
			q.maintMu.Lock()
			bg.cancel, bg.running = nil, false
			q.maintMu.Unlock()
		}()
		if _, _, err := q.Maintain(ctx); err != nil && ctx.Err() == nil {
			q.log.Warn("sqlqueue: maintenance pass failed; the next one retries", "table", q.t.raw, "err", err)
		}
	}()
}

// closeMaintenance stops a pass maintainInBackground started and waits
// for it; no pass starts after it.
func (q *Queue) closeMaintenance() {
	q.maintMu.Lock()
	bg := &q.maintBG
	bg.closed = true
	if bg.cancel != nil {
		bg.cancel()
	}
	q.maintMu.Unlock()
	bg.wg.Wait()
}

// pruneBatches deletes up to maxPruneBatches rounds of 100 batches that
// finished before cutoff, each with its member rows in one transaction.
func (q *Queue) pruneBatches(ctx context.Context, cutoff time.Time) (int, error) {
	return q.pruneFinished(ctx, qFinishedBatches, cutoff, qDeleteBatchMembers, qDeleteBatches)
}

// pruneFinished deletes up to maxPruneBatches rounds of the up to 100
// workflows (batches, graphs) that sel lists as finished before cutoff:
// each round runs dels, each on the round's ID list, in one fenced
// transaction, and the rows of a workflow go with it.
func (q *Queue) pruneFinished(ctx context.Context, sel query, cutoff time.Time, dels ...query) (int, error) {
	total := 0
	for range maxPruneBatches {
		ids, err := queryStrings(ctx, stmts(q.db), q.stmt(sel), micros(cutoff))
		if err != nil || len(ids) == 0 {
			return total, err
		}
		err = q.fencedTx(ctx, func(st statements) error {
			for _, stmt := range dels {
				n, err := q.execIn(ctx, st, stmt, ids)
				if err != nil {
					return err
				}
				total += int(n)
			}
			return nil
		})
		if err != nil || len(ids) < 100 {
			return total, err
		}
	}
	return total, nil
}
