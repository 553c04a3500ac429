package sqlqueue

import (
	"context"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// maxMetricKeys bounds the buffer of unflushed metrics (queues x minutes)
// while the database is unreachable; records beyond it are dropped.
const maxMetricKeys = 10000

type metricKey struct {
	queue  string
	minute int64 // Unix seconds of the minute's start
}

type metricAgg struct {
	processed, failed                   int64
	runtimeTotal, runtimeMax, waitTotal int64 // microseconds
}

func (a *metricAgg) add(b metricAgg) {
	a.processed += b.processed
	a.failed += b.failed
	a.runtimeTotal += b.runtimeTotal
	a.runtimeMax = max(a.runtimeMax, b.runtimeMax)
	a.waitTotal += b.waitTotal
}

// metricsBuffer aggregates run records per queue per minute until a flush
// writes them.
type metricsBuffer struct {
	mu        sync.Mutex
	m         map[metricKey]*metricAgg
	lastFlush time.Time
}

func (b *metricsBuffer) addLocked(k metricKey, a metricAgg) {
	if b.m == nil {
		b.m = make(map[metricKey]*metricAgg)
	}
	cur := b.m[k]
	if cur == nil {
		if len(b.m) >= maxMetricKeys {
			return
		}
		cur = &metricAgg{}
		b.m[k] = cur
	}
	cur.add(a)
}

// ObserveRun records one finished attempt for the per-minute metrics. It
// only buffers in memory; the next ack, nack, fail or heartbeat at least a
// second after the previous flush writes the buffer (one upsert per queue
// and minute), as do FlushMetrics and Close. Safe for concurrent use.
func (q *Queue) ObserveRun(r queue.RunRecord) {
	start := r.Start
	if start.IsZero() {
		start = time.Now()
	}
	name := r.Queue
	if name == "" {
		name = queue.DefaultQueue
	}
	a := metricAgg{runtimeTotal: r.Runtime.Microseconds(), runtimeMax: r.Runtime.Microseconds(), waitTotal: max(r.Wait.Microseconds(), 0)}
	if r.Outcome == queue.OutcomeDone {
		a.processed = 1
	} else {
		a.failed = 1
	}
	k := metricKey{queue: name, minute: start.Truncate(time.Minute).Unix()}
	q.metrics.mu.Lock()
	q.metrics.addLocked(k, a)
	q.metrics.mu.Unlock()
}

// flushMetricsIfDue flushes the buffer if it holds records and the last
// flush is at least a second old. A failed flush keeps the records for the
// next one and does not fail the call that triggered it.
func (q *Queue) flushMetricsIfDue(ctx context.Context) {
	q.metrics.mu.Lock()
	due := len(q.metrics.m) > 0 && time.Since(q.metrics.lastFlush) >= q.cfg.metricsFlushIn
	q.metrics.mu.Unlock()
	if due {
		q.flushMetricsLogged(ctx)
	}
}

// FlushMetrics writes the buffered run metrics now, adding them to the
// per-minute rows in the <table>_metrics table. On error the records stay
// buffered for the next flush.
func (q *Queue) FlushMetrics(ctx context.Context) error {
	q.metrics.mu.Lock()
	batch := q.metrics.m
	q.metrics.m = nil
	q.metrics.lastFlush = time.Now()
	q.metrics.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := q.use(ctx); err != nil {
		q.restoreMetrics(batch)
		return err
	}
	upsert := q.stmt(qMetricsUpsert)
	for k, a := range batch {
		_, err := q.db.ExecContext(ctx, upsert, k.queue, k.minute, a.processed, a.failed, a.runtimeTotal, a.runtimeMax, a.waitTotal)
		if err != nil {
			q.restoreMetrics(batch)
			return q.wrap(ctx, err, "writing run metrics")
		}
		delete(batch, k)
	}
	return nil
}

// flushMetricsLogged flushes the buffer for a call that does not fail on a
// failed flush; the records stay buffered and the error is logged.
func (q *Queue) flushMetricsLogged(ctx context.Context) {
	if err := q.FlushMetrics(ctx); err != nil && ctx.Err() == nil {
		q.log.Warn("sqlqueue: writing run metrics failed; kept for the next flush", "table", q.t.raw, "err", err)
	}
}

func (q *Queue) restoreMetrics(batch map[metricKey]*metricAgg) {
	q.metrics.mu.Lock()
	defer q.metrics.mu.Unlock()
	for k, a := range batch {
		q.metrics.addLocked(k, *a)
	}
}

// Metrics returns the per-minute points from since (rounded down to its
// minute) to now, oldest first, at most 100,000 of them. It flushes this
// process's buffered records first so they are included.
func (q *Queue) Metrics(ctx context.Context, since time.Time) ([]queue.MetricPoint, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	q.flushMetricsLogged(ctx)
	rs, err := q.readDB().QueryContext(ctx, q.stmt(qMetrics), since.Truncate(time.Minute).Unix())
	if err != nil {
		return nil, q.wrap(ctx, err, "reading metrics")
	}
	var got []struct {
		Queue      string `db:"queue"`
		Minute     int64  `db:"minute_at"`
		Processed  int64  `db:"processed"`
		Failed     int64  `db:"failed"`
		Runtime    int64  `db:"runtime_total_us"`
		RuntimeMax int64  `db:"runtime_max_us"`
		Wait       int64  `db:"wait_total_us"`
	}
	if err := sqlx.StructScan(rs, &got); err != nil {
		return nil, q.wrap(ctx, err, "reading metrics")
	}
	out := make([]queue.MetricPoint, len(got))
	for i, m := range got {
		out[i] = queue.MetricPoint{
			Queue: m.Queue, Minute: time.Unix(m.Minute, 0).UTC(), Processed: m.Processed, Failed: m.Failed,
			TotalRuntime: time.Duration(m.Runtime) * time.Microsecond,
			MaxRuntime:   time.Duration(m.RuntimeMax) * time.Microsecond,
			TotalWait:    time.Duration(m.Wait) * time.Microsecond,
		}
	}
	return out, nil
}
