package sqlqueue

import (
	"context"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

var _ queue.Fleet = (*Queue)(nil)

// fleetTarget is the fleet's own row in the <table>_fleet table; worker
// IDs never take that form.
const fleetTarget = "*"

// CommandWorkers records cmd for worker id, or for the fleet when id is ""
// (queue.Fleet): one upsert or update of a row of the <table>_fleet table.
func (q *Queue) CommandWorkers(ctx context.Context, id string, cmd queue.WorkerCommand) error {
	if !cmd.Valid() {
		return fmt.Errorf("sqlqueue: commanding workers: unknown command %q: %w", cmd, queue.ErrInvalid)
	}
	if id == fleetTarget {
		return fmt.Errorf("sqlqueue: commanding workers: %q is no worker ID: %w", id, queue.ErrInvalid)
	}
	if err := q.use(ctx); err != nil {
		return err
	}
	now := micros(time.Now())
	var err error
	switch {
	case cmd == queue.CommandTerminate && id == "":
		_, err = q.db.ExecContext(ctx, q.stmt(qFleetTerminateAll), now)
	case cmd == queue.CommandTerminate:
		_, err = q.db.ExecContext(ctx, q.stmt(qFleetTerminate), id, now)
	case cmd == queue.CommandPause:
		_, err = q.db.ExecContext(ctx, q.stmt(qFleetPause), or(id, fleetTarget), now)
	case id == "":
		_, err = q.db.ExecContext(ctx, q.stmt(qFleetContinueAll), now)
	default:
		_, err = q.db.ExecContext(ctx, q.stmt(qFleetContinue), now, id)
	}
	if err != nil {
		return q.wrap(ctx, err, "commanding workers %q to %s", or(id, fleetTarget), cmd)
	}
	return nil
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// WorkerOrders returns the orders in force for worker id (queue.Fleet):
// one read of at most two rows by primary key.
func (q *Queue) WorkerOrders(ctx context.Context, id string) (queue.WorkerOrders, error) {
	var o queue.WorkerOrders
	if err := q.use(ctx); err != nil {
		return o, err
	}
	rows, err := q.db.QueryContext(ctx, q.stmt(qFleetOrders), id)
	if err != nil {
		return o, q.wrap(ctx, err, "reading the orders of worker %s", id)
	}
	defer rows.Close()
	for rows.Next() {
		var target string
		var paused int
		var terms int64
		if err := rows.Scan(&target, &paused, &terms); err != nil {
			return o, q.wrap(ctx, err, "reading the orders of worker %s", id)
		}
		o.Paused = o.Paused || paused != 0
		if target == fleetTarget {
			o.Terminations = terms
		} else {
			o.Terminate = terms != 0
		}
	}
	if err := rows.Err(); err != nil {
		return o, q.wrap(ctx, err, "reading the orders of worker %s", id)
	}
	return o, nil
}

// PausedWorkers reports whether the fleet is paused and lists the workers
// paused on their own, sorted, at most 1000 (queue.Fleet).
func (q *Queue) PausedWorkers(ctx context.Context) (bool, []string, error) {
	if err := q.use(ctx); err != nil {
		return false, nil, err
	}
	o, err := q.WorkerOrders(ctx, fleetTarget)
	if err != nil {
		return false, nil, err
	}
	rows, err := q.db.QueryContext(ctx, q.stmt(qFleetPaused))
	if err != nil {
		return false, nil, q.wrap(ctx, err, "listing paused workers")
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return false, nil, q.wrap(ctx, err, "listing paused workers")
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return false, nil, q.wrap(ctx, err, "listing paused workers")
	}
	return o.Paused, ids, nil
}
