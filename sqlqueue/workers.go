package sqlqueue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/meridianjobs/meridian/queue"
)

// Heartbeat creates or refreshes the registry entry w.ID with LastSeen now
// (StartedAt is kept from the first heartbeat). It also flushes buffered
// run metrics when due and, at most once per maintenance interval per
// Queue, runs a maintenance pass (see Maintain); a failed pass does not
// fail the heartbeat.
func (q *Queue) Heartbeat(ctx context.Context, w queue.WorkerInfo) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	now := time.Now()
	if w.StartedAt.IsZero() {
		w.StartedAt = now
	}
	queues, _ := json.Marshal(w.Queues) // a []string always marshals
	_, err := q.db.ExecContext(ctx, q.sql(q.d.upsertWorker("{workers}")), w.ID, w.Host, w.PID, string(queues), w.Concurrency, micros(w.StartedAt), micros(now))
	if err != nil {
		return q.wrap(ctx, err, "recording heartbeat of worker %s", w.ID)
	}
	q.flushMetricsIfDue(ctx)
	q.maintainIfDue(ctx)
	return nil
}

// Deregister removes the registry entry id and flushes buffered metrics.
func (q *Queue) Deregister(ctx context.Context, id string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	if _, err := q.db.ExecContext(ctx, q.sql("DELETE FROM {workers} WHERE id = ?"), id); err != nil {
		return q.wrap(ctx, err, "deregistering worker %s", id)
	}
	q.flushMetricsLogged(ctx)
	return nil
}

// Workers lists the entries seen within the worker TTL (WithMaintenance),
// sorted by ID, at most 1000.
func (q *Queue) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	rs, err := q.readDB().QueryContext(ctx, q.sql(`SELECT id, host, pid, queues, concurrency, started_at, last_seen FROM {workers}
WHERE last_seen >= ? ORDER BY id LIMIT 1000`), micros(time.Now().Add(-q.cfg.workerTTL)))
	if err != nil {
		return nil, q.wrap(ctx, err, "listing workers")
	}
	var got []struct {
		ID          string `db:"id"`
		Host        string `db:"host"`
		PID         int    `db:"pid"`
		Queues      string `db:"queues"`
		Concurrency int    `db:"concurrency"`
		Started     int64  `db:"started_at"`
		Seen        int64  `db:"last_seen"`
	}
	if err := sqlx.StructScan(rs, &got); err != nil {
		return nil, q.wrap(ctx, err, "listing workers")
	}
	out := make([]queue.WorkerInfo, len(got))
	for i, w := range got {
		out[i] = queue.WorkerInfo{ID: w.ID, Host: w.Host, PID: w.PID, Concurrency: w.Concurrency,
			StartedAt: fromMicros(w.Started), LastSeen: fromMicros(w.Seen)}
		if err := json.Unmarshal([]byte(w.Queues), &out[i].Queues); err != nil {
			q.log.Warn("sqlqueue: a worker's queue list is not valid JSON; listed without it", "table", q.t.raw, "worker", w.ID, "err", err)
		}
	}
	return out, nil
}
