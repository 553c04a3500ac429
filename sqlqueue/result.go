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

// pinnedUntil is the expiry of a result kept while its graph or batch
// runs: past any real time, so Result reads it and no prune takes it,
// until the graph or batch finishes and dates it (releaseResults).
const pinnedUntil = int64(1) << 62

// keepResult stores a done outcome's result (o.Result) in <table>_results
// on st, in the transaction of its job's ack, replacing one stored
// before; an outcome without a result, or with one already past its time,
// costs no statement. Acks without results keep their batched path
// (Complete sends an outcome with a result through completeRest). With
// pin (a node of a graph, or a member of a batch, that was pending) the
// result is kept until its graph or batch finishes, and then for as long
// as o gives it from now (ResultUntil less now): see releaseResults.
func (q *Queue) keepResult(ctx context.Context, st statements, o queue.Completion, now time.Time, pin bool) error {
	if o.Result == nil || !o.ResultUntil.After(now) {
		return nil
	}
	if pin {
		keep := max(o.ResultUntil.Sub(now).Microseconds(), 1)
		_, err := st.Exec(ctx, q.stmt(qResultPin), o.Lease.JobID, o.Result, pinnedUntil, keep)
		return err
	}
	_, err := st.Exec(ctx, q.stmt(qResultPut), o.Lease.JobID, o.Result, micros(o.ResultUntil))
	return err
}

// releaseResults dates the pinned results of graph or batch id (stmt is
// qResultsReleaseGraph or qResultsReleaseBatch), which finished at now:
// each is kept from now for its own retention.
func (q *Queue) releaseResults(ctx context.Context, st statements, stmt query, id string, now int64) error {
	_, err := st.Exec(ctx, q.stmt(stmt), now, pinnedUntil, id)
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
