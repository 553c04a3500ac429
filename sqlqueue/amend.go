package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Amend changes the job id as a says (see queue.Controller): a read of
// the job and one guarded change in a short write transaction, the
// action appended to the job's history column in the same statement.
// AmendRetry keeps the job's ID, sequence and history; a done or
// cancelled job is found only while retention keeps it (WithRetention).
func (q *Queue) Amend(ctx context.Context, id string, a queue.Amendment) (queue.JobState, error) {
	if err := q.use(ctx); err != nil {
		return "", err
	}
	now := time.Now()
	rec := a.Action.Dated(now)
	act := []any{micros(rec.At), rec.By, rec.What}
	var was queue.JobState
	err := q.againOnConflict(ctx, func() error {
		return q.d.writeTx(ctx, q, func(ex execer) error {
			st := stmts(ex)
			rows, err := q.scanRows(ctx, st, q.stmt(qJob), []any{id})
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				return queue.ErrNotFound
			}
			r := rows[0]
			was = r.info(micros(now)).State
			var n int64
			switch {
			case a.From != "" && was != a.From:
				return fmt.Errorf("the job is %s, not %s: %w", was, a.From, queue.ErrJobState)
			case a.Op == queue.AmendNote:
				n, err = st.Exec(ctx, q.stmt(qAmendNote), append(act, id)...)
			case a.Op == queue.AmendRunNow && was == queue.StateScheduled:
				n, err = st.Exec(ctx, q.stmt(qAmendRunNow), append(act, micros(now), micros(now), micros(now), id, micros(now))...)
			case a.Op == queue.AmendRetry && retryable(r):
				j := r.job
				if a.Payload != nil {
					j.Payload = a.Payload
				}
				if err := queue.Validate(j); err != nil {
					return err
				}
				n, err = st.Exec(ctx, q.stmt(qAmendRetry), append(act, j.Payload, micros(now), micros(now), micros(now), id, r.state)...)
			default:
				return fmt.Errorf("the job is %s: %w", was, queue.ErrJobState)
			}
			if err == nil && n == 0 {
				// Changed between the read and the change (reserved, or
				// pruned): the job is no longer as it was read.
				return fmt.Errorf("the job changed while being amended: %w", queue.ErrJobState)
			}
			return err
		})
	})
	doing := fmt.Sprintf("amending job %s (%s)", id, a.Op)
	var invalid *queue.ValidationError
	switch {
	case err == nil:
	case errors.As(err, &invalid):
		return "", err
	case q.d.isUniqueViolation(err):
		return "", fmt.Errorf("sqlqueue: %s: its unique key is held by an active job: %w", doing, queue.ErrDuplicate)
	case errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrJobState):
		return "", fmt.Errorf("sqlqueue: %s: %w", doing, err)
	default:
		return "", q.wrap(ctx, err, "%s", doing)
	}
	q.wake.signal()
	return was, nil
}

// retryable reports whether AmendRetry applies to r: a dead letter, or a
// cancelled or done job that was not a batch member.
func retryable(r row) bool {
	switch r.state {
	case stateDead:
		return true
	case stateDone, stateCancelled:
		return r.job.Meta[queue.MetaBatch] == ""
	}
	return false
}
