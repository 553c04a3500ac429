package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

var _ queue.Results = (*Queue)(nil)

// keepResult stores a done outcome's result (o.Result) in <table>_results
// on st, in the transaction of its job's ack, replacing one stored
// before; an outcome without a result, or with one already past its time,
// costs no statement. Acks without results keep their batched path
// (Complete sends an outcome with a result through completeRest).
func (q *Queue) keepResult(ctx context.Context, st statements, o queue.Completion, now time.Time) error {
	if o.Result == nil || !o.ResultUntil.After(now) {
		return nil
	}
	_, err := st.Exec(ctx, q.stmt(qResultPut), o.Lease.JobID, o.Result, micros(o.ResultUntil))
	return err
}

// Result returns the result stored for job id (see driver.Results).
func (q *Queue) Result(ctx context.Context, id string) ([]byte, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	var b []byte
	err := queryRow(ctx, stmts(q.db), q.stmt(qResultGet), []any{id, micros(time.Now())}, &b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlqueue: job %s's result: %w", id, queue.ErrNotFound)
	}
	if err != nil {
		return nil, q.wrap(ctx, err, "reading job %s's result", id)
	}
	return b, nil
}
