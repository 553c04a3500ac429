package sqlqueue

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Sequences (queue.Sequence, driver.Sequencer) live in two tables beside
// the jobs: {sequences}, one row per sequence with members, naming its
// head (the member a claim may take, or the dead letter that holds the
// sequence), and {sequence_jobs}, one row per waiting member, in push
// order (pos). A waiting member's job is in state 'sequenced', which no
// claim reads, so the claim and the ack of jobs outside sequences run the
// statements they ran before.
//
// Every change that decides a head runs under the sequence row's lock
// (SQLite: the write transaction's): a push of a member takes or locks the
// row (qSeqTake) and reads the head; the end of a head (its ack, cancel,
// deletion, dead-lettering with ReleaseOnDead, an operator's release)
// locks the row by its head (qSeqHeadsOf, qSeqHeadsGone) and promotes the
// next waiting member in the same transaction. A path that removes jobs
// in bulk (Purge, FlushDead, bulk forget and cancel, the pruning of dead
// letters) settles the sequences of the jobs it removed afterwards in its
// transaction: heads that no longer hold pass on (seqLeave), so a head can
// leave whatever removed it.

// markSequenced seats the stored sequence members of js, in order, in the
// push's transaction (holdsInTx gives every push of a member one): a
// member becomes its sequence's head when the sequence has none, and
// otherwise waits. A member pushed with the ID of its sequence's dead head
// (a revive) stays the head. A push without members runs no statement
// here.
func (q *Queue) markSequenced(ctx context.Context, ex statements, js []queue.Job, stored []bool) error {
	for i, j := range js {
		key := j.Meta[queue.MetaSequence]
		if key == "" || !stored[i] {
			continue
		}
		if _, err := ex.Exec(ctx, q.stmt(qSeqTake), j.Queue, key, j.ID); err != nil {
			return err
		}
		var head string
		if err := queryRow(ctx, ex, q.stmt(qSeqHead), []any{j.Queue, key}, &head); err != nil {
			return err
		}
		if head == j.ID {
			continue
		}
		if _, err := ex.Exec(ctx, q.stmt(qSeqWait), j.ID); err != nil {
			return err
		}
		if _, err := ex.Exec(ctx, q.stmt(qSeqJoin), j.Queue, key, j.ID); err != nil {
			return err
		}
	}
	return nil
}

// seqHead is one sequence, by its queue and key, and its head.
type seqHead struct{ queue, key, head string }

// seqPassOn passes on the sequences headed by jobs of ids, on st in the
// transaction that ended those jobs: with force, whatever their heads'
// state (an operator's release, a dead-lettering with ReleaseOnDead);
// without, only those whose head no longer holds them (done, cancelled
// or deleted). It reports whether a member was promoted.
func (q *Queue) seqPassOn(ctx context.Context, st statements, ids []string, force bool) (bool, error) {
	if len(ids) == 0 {
		return false, nil
	}
	sel := qSeqHeadsGone
	if force {
		sel = qSeqHeadsOf
	}
	query, args, err := q.stmtIn(sel, ids)
	if err != nil {
		return false, err
	}
	rows, err := st.Query(ctx, query, args...)
	if err != nil {
		return false, err
	}
	var heads []seqHead
	for rows.Next() {
		var h seqHead
		if err := rows.Scan(&h.queue, &h.key, &h.head); err != nil {
			rows.Close()
			return false, err
		}
		heads = append(heads, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	promoted := false
	for _, h := range heads {
		p, err := q.seqPromote(ctx, st, h.queue, h.key)
		if err != nil {
			return false, err
		}
		promoted = promoted || p
	}
	return promoted, nil
}

// seqLeave settles the sequences of the jobs ids after a change that may
// have cancelled or deleted them: the waiting rows of those no longer
// waiting go, and the sequences whose head no longer holds them pass on.
func (q *Queue) seqLeave(ctx context.Context, st statements, ids []string) (bool, error) {
	if len(ids) == 0 {
		return false, nil
	}
	if _, err := q.execIn(ctx, st, qSeqDropGone, ids); err != nil {
		return false, err
	}
	return q.seqPassOn(ctx, st, ids, false)
}

// seqPromote makes the first waiting member of the sequence key of
// queueName its head (pending again, at its own run time), skipping rows
// whose job is no longer waiting, or deletes the sequence's row when none
// waits. The caller holds the sequence's row. On a dialect that notifies,
// the promotion's notification commits with it.
func (q *Queue) seqPromote(ctx context.Context, st statements, queueName, key string) (bool, error) {
	for {
		var pos int64
		var id string
		err := queryRow(ctx, st, q.stmt(qSeqNext), []any{queueName, key}, &pos, &id)
		if errors.Is(err, sql.ErrNoRows) {
			_, err = st.Exec(ctx, q.stmt(qSeqDelete), queueName, key)
			return false, err
		}
		if err != nil {
			return false, err
		}
		if _, err := st.Exec(ctx, q.stmt(qSeqDropPos), pos); err != nil {
			return false, err
		}
		n, err := st.Exec(ctx, q.stmt(qSeqWake), id)
		if err != nil {
			return false, err
		}
		if n == 0 {
			continue // cancelled or deleted meanwhile
		}
		if _, err := st.Exec(ctx, q.stmt(qSeqSetHead), id, queueName, key); err != nil {
			return false, err
		}
		return true, q.d.notifyTx(ctx, q, st, []queue.Job{{Queue: queueName}}, []bool{true})
	}
}

// completeSequence is the part of a completion o (already recorded on st)
// that concerns its sequence: a done or cancelled head, or a dead one
// that releases on dead, passes the sequence on.
func (q *Queue) completeSequence(ctx context.Context, st statements, o queue.Completion) error {
	var force bool
	switch {
	case o.Outcome == queue.OutcomeDone || o.Outcome == queue.OutcomeCancelled:
	case o.Outcome == queue.OutcomeFailed && o.ReleaseOnDead:
		force = true
	default:
		return nil
	}
	_, err := q.seqPassOn(ctx, st, []string{o.Lease.JobID}, force)
	return err
}

// releasesSequence reports whether o ends a job in a way that may pass
// its sequence on, so Complete records it where completeSequence runs.
func releasesSequence(o queue.Completion) bool {
	return o.Sequence != "" && (o.Outcome == queue.OutcomeDone || o.Outcome == queue.OutcomeCancelled ||
		o.Outcome == queue.OutcomeFailed && o.ReleaseOnDead)
}

// HeldSequences lists the sequences of queueName ("" for every queue)
// headed by a dead letter that holds them (see driver.Sequencer), most
// recently dead first.
func (q *Queue) HeldSequences(ctx context.Context, queueName string, limit int) ([]queue.SequenceInfo, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	limit = queue.HeldLimit(limit)
	query, args := q.stmt(qSeqHeld), []any{limit}
	if queueName != "" {
		query, args = q.stmt(qSeqHeldOf), []any{queueName, limit}
	}
	st := stmts(q.db)
	rows, err := st.Query(ctx, query, args...)
	if err != nil {
		return nil, q.wrap(ctx, err, "listing held sequences")
	}
	var out []queue.SequenceInfo
	var heads []string
	for rows.Next() {
		var s queue.SequenceInfo
		var head string
		if err := rows.Scan(&s.Queue, &s.Key, &head, &s.Waiting); err != nil {
			rows.Close()
			return nil, q.wrap(ctx, err, "listing held sequences")
		}
		out, heads = append(out, s), append(heads, head)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, q.wrap(ctx, err, "listing held sequences")
	}
	for i, id := range heads {
		rs, err := q.scanRows(ctx, st, q.stmt(qJob), []any{id})
		if err != nil {
			return nil, q.wrap(ctx, err, "reading the head of sequence %s", out[i].Key)
		}
		if len(rs) == 1 {
			out[i].Head = rs[0].info(micros(time.Now()))
		}
	}
	// A head gone between the two reads (forgotten) is left out.
	kept := out[:0]
	for _, s := range out {
		if s.Head.ID != "" {
			kept = append(kept, s)
		}
	}
	return kept, nil
}

// ReleaseSequence releases the sequence key of queueName held by its dead
// head (see driver.Sequencer): the next member becomes ready in the same
// transaction; the dead letter stays.
func (q *Queue) ReleaseSequence(ctx context.Context, queueName, key string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	queueName = cmp.Or(queueName, queue.DefaultQueue)
	err := q.againOnConflict(ctx, func() error {
		return q.d.writeTx(ctx, q, func(ex execer) error {
			st := stmts(ex)
			var head, state string
			err := queryRow(ctx, st, q.stmt(qSeqHead), []any{queueName, key}, &head)
			if err == nil {
				err = queryRow(ctx, st, q.stmt(qJobState), []any{head}, &state)
			}
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return queue.ErrNotFound
			case err != nil:
				return err
			case state != stateDead:
				return queue.ErrNotFound
			}
			_, err = q.seqPromote(ctx, st, queueName, key)
			return err
		})
	})
	if errors.Is(err, queue.ErrNotFound) {
		return fmt.Errorf("sqlqueue: releasing sequence %s of queue %s: no dead head holds it: %w", key, queueName, err)
	}
	if err != nil {
		return q.wrap(ctx, err, "releasing sequence %s of queue %s", key, queueName)
	}
	q.wake.signal() // the next member is claimable now
	return nil
}

var _ queue.Sequencer = (*Queue)(nil)
