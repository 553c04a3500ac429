package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

// copyMin is the smallest batch PushMany loads with COPY: below it the
// multi-row INSERT's one statement costs no more than COPY's transaction,
// from it on COPY is clearly cheaper (BenchmarkPushMany; the figures are
// in docs/benchmarks.md).
const copyMin = 250

// PushMany stores jobs with sqlqueue's PushMany rules (see
// queue.BatchPusher). A batch of at least 250 jobs none of which has a
// unique key or repeats another's ID is loaded with one COPY statement,
// notified after its commit as other pushes are; if COPY meets an
// ID that is already stored (an active job, or a dead letter to revive),
// the whole batch goes again through sqlqueue's multi-row INSERT ... ON
// CONFLICT DO NOTHING, which decides job by job. Other batches take that
// path at once.
func (q *Queue) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	if err := queue.ValidateBatch(jobs); err != nil {
		return nil, err
	}
	if len(jobs) < copyMin || slices.ContainsFunc(jobs, func(j queue.Job) bool { return j.UniqueKey != "" }) {
		return q.Queue.PushMany(ctx, jobs)
	}
	stored, err := q.pushCopy(ctx, jobs)
	if errors.Is(err, errConflict) {
		return q.Queue.PushMany(ctx, jobs)
	}
	return stored, err
}

// errConflict sends a batch to the multi-row INSERT.
var errConflict = errors.New("sqlqueue/postgres: an ID in the batch is taken")

// pushCopy loads jobs with COPY, all or nothing, and returns errConflict
// when an ID repeats within the batch or is already stored.
func (q *Queue) pushCopy(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	h := hook.Of(q.Queue)
	if err := h.CheckSchema(ctx); err != nil {
		return nil, err
	}
	table, cols, rows := h.CopyRows(jobs)
	idCol := slices.Index(cols, "id")
	ids := make(map[any]bool, len(rows))
	for _, r := range rows {
		if ids[r[idCol]] {
			return nil, errConflict
		}
		ids[r[idCol]] = true
	}
	_, err := q.pool.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return nil, errConflict
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		return nil, fmt.Errorf("sqlqueue/postgres: copying %d jobs: %w", len(jobs), err)
	}
	h.Announce(jobs)
	stored := make([]bool, len(jobs))
	for i := range stored {
		stored[i] = true
	}
	return stored, nil
}
