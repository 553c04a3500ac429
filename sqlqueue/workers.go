package sqlqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/jmoiron/sqlx"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Heartbeat creates or refreshes the registry entry w.ID with LastSeen now
// (StartedAt is kept from the first heartbeat) and the jobs w holds
// (w.Running and w.Reserved, replacing those of its last heartbeat), from
// which Counts and QueueStats count the running jobs and ListJobs finds
// them. It also flushes buffered run metrics when due and, at most once
// per maintenance interval per Queue, runs a maintenance pass (see
// Maintain); a failed pass does not fail the heartbeat.
func (q *Queue) Heartbeat(ctx context.Context, w queue.WorkerInfo) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	now := time.Now()
	if w.StartedAt.IsZero() {
		w.StartedAt = now
	}
	queues, _ := json.Marshal(w.Queues) // a []string always marshals
	_, err := q.db.ExecContext(ctx, q.stmt(qWorkerUpsert), w.ID, w.Host, w.PID, string(queues), w.Concurrency, micros(w.StartedAt), micros(now),
		heldJSON(w.Running), heldJSON(w.Reserved), w.MaxAttempts)
	if err != nil {
		return q.wrap(ctx, err, "recording heartbeat of worker %s", w.ID)
	}
	q.flushMetricsIfDue(ctx)
	q.maintainIfDue(ctx)
	return nil
}

// heldJSON is the column value of a count of held jobs by queue: a JSON
// object of the non-zero counts, or NULL when there is none.
func heldJSON(m map[string]int) sql.NullString {
	var keep map[string]int
	for name, n := range m {
		if n > 0 {
			if keep == nil {
				keep = make(map[string]int, len(m))
			}
			keep[name] = n
		}
	}
	if keep == nil {
		return sql.NullString{}
	}
	b, _ := json.Marshal(keep) // a map[string]int always marshals
	return sql.NullString{String: string(b), Valid: true}
}

// parseHeld reads a column heldJSON wrote: nil for NULL; an error for
// text that is not such an object.
func parseHeld(s sql.NullString) (map[string]int, error) {
	if !s.Valid || s.String == "" {
		return nil, nil
	}
	var m map[string]int
	if err := json.Unmarshal([]byte(s.String), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Deregister removes the registry entry id, and the fleet commands for it
// (CommandWorkers), and flushes buffered metrics.
func (q *Queue) Deregister(ctx context.Context, id string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	if _, err := q.db.ExecContext(ctx, q.stmt(qWorkerDelete), id); err != nil {
		return q.wrap(ctx, err, "deregistering worker %s", id)
	}
	if _, err := q.db.ExecContext(ctx, q.stmt(qFleetDelete), id); err != nil {
		return q.wrap(ctx, err, "deleting the fleet commands of worker %s", id)
	}
	q.flushMetricsLogged(ctx)
	return nil
}

// Workers lists the entries seen within the worker TTL (WithMaintenance),
// sorted by ID, at most 1000, each with the jobs it held at its last
// heartbeat.
func (q *Queue) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	rs, err := q.readDB().QueryContext(ctx, q.stmt(qWorkers), micros(time.Now().Add(-q.cfg.workerTTL)))
	if err != nil {
		return nil, q.wrap(ctx, err, "listing workers")
	}
	var got []struct {
		ID          string         `db:"id"`
		Host        string         `db:"host"`
		PID         int            `db:"pid"`
		Queues      string         `db:"queues"`
		Concurrency int            `db:"concurrency"`
		Started     int64          `db:"started_at"`
		Seen        int64          `db:"last_seen"`
		Running     sql.NullString `db:"running"`
		Reserved    sql.NullString `db:"reserved"`
		MaxAttempts int            `db:"max_attempts"`
	}
	if err := sqlx.StructScan(rs, &got); err != nil {
		return nil, q.wrap(ctx, err, "listing workers")
	}
	out := make([]queue.WorkerInfo, len(got))
	for i, w := range got {
		out[i] = queue.WorkerInfo{ID: w.ID, Host: w.Host, PID: w.PID, Concurrency: w.Concurrency,
			StartedAt: fromMicros(w.Started), LastSeen: fromMicros(w.Seen), MaxAttempts: w.MaxAttempts}
		if err := json.Unmarshal([]byte(w.Queues), &out[i].Queues); err != nil {
			q.log.Warn("sqlqueue: a worker's queue list is not valid JSON; listed without it", "table", q.t.raw, "worker", w.ID, "err", err)
		}
		running, err1 := parseHeld(w.Running)
		reserved, err2 := parseHeld(w.Reserved)
		if err1 != nil || err2 != nil {
			q.log.Warn("sqlqueue: a worker's held jobs are not valid JSON; listed without them", "table", q.t.raw, "worker", w.ID, "running", err1, "reserved", err2)
			continue
		}
		out[i].Running, out[i].Reserved = running, reserved
	}
	return out, nil
}

// maxHeldWorkers bounds the workers whose held jobs one inspection call
// reads (heldByQueue).
const maxHeldWorkers = 10000

// heldByQueue sums the jobs the workers seen within the worker TTL hold
// (WorkerInfo.Running plus Reserved, as they last reported them) by
// queue: the running jobs, read in O(workers) rows, since no index holds
// a job's lease expiry. Queues no live worker holds a job of are absent.
// A report that is not valid JSON counts nothing. Errors are returned
// unwrapped, for the caller to say what it was doing.
func (q *Queue) heldByQueue(ctx context.Context, st statements, now time.Time) (map[string]int64, error) {
	rows, err := st.Query(ctx, q.stmt(qWorkersHeld),
		micros(now.Add(-q.cfg.workerTTL)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var running, reserved sql.NullString
		if err := rows.Scan(&running, &reserved); err != nil {
			return nil, err
		}
		for _, col := range []sql.NullString{running, reserved} {
			m, err := parseHeld(col)
			if err != nil {
				continue
			}
			for name, n := range m {
				if n > 0 {
					out[name] += int64(n)
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
