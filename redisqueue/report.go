package redisqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue/driver"
)

// The Reporter ability: the worker registry and the run metrics.
//
//	{prefix}:workers        hash: worker ID -> its WorkerInfo as JSON (LastSeen aside)
//	{prefix}:seen           sorted set: worker ID, scored by its last heartbeat (ms)
//	base:m:<hour>           hash: the run metrics of the queue's minutes of one hour
//	                        (Unix seconds of its start), fields <minute><p|f|rt|rm|wt>:
//	                        processed, failed, total and max runtime and total wait (µs)
//
// A heartbeat drops the entries not seen within workerTTL (a hundred at a
// time); Workers lists only those seen within it. A metrics hash expires
// metricsRetention after its hour ends.

// Bounds of the registry and the metrics.
const (
	workerTTL        = 2 * time.Minute
	maxWorkers       = 1000 // the most entries Workers lists
	metricsRetention = 7 * 24 * time.Hour
	// metricsFlushIn is the least time between two writes of the
	// buffered metrics that a heartbeat makes.
	metricsFlushIn = time.Second
	// maxMetricKeys bounds the buffer: the (queue, minute) pairs it
	// holds; records of new pairs beyond it are dropped until a flush.
	maxMetricKeys = 10000
)

// metricKey is one queue's minute, and metricAgg its runs.
type metricKey struct {
	queue  string
	minute int64 // Unix seconds of its start
}

type metricAgg struct {
	processed, failed                  int64
	runtimeTotal, runtimeMax, waitTotl int64 // µs
}

func (a *metricAgg) add(b metricAgg) {
	a.processed += b.processed
	a.failed += b.failed
	a.runtimeTotal += b.runtimeTotal
	a.runtimeMax = max(a.runtimeMax, b.runtimeMax)
	a.waitTotl += b.waitTotl
}

// reporter is the Queue's buffer of run metrics not yet written.
type reporter struct {
	mu        sync.Mutex
	m         map[metricKey]*metricAgg
	lastFlush time.Time
}

func (r *reporter) addLocked(k metricKey, a metricAgg) {
	if r.m == nil {
		r.m = make(map[metricKey]*metricAgg)
	}
	cur := r.m[k]
	if cur == nil {
		if len(r.m) >= maxMetricKeys {
			return
		}
		cur = &metricAgg{}
		r.m[k] = cur
	}
	cur.add(a)
}

func (q *Queue) workersKey() string { return "{" + q.prefix + "}:workers" }
func (q *Queue) seenKey() string    { return "{" + q.prefix + "}:seen" }

// workerRecord is what the registry keeps of a WorkerInfo.
type workerRecord struct {
	Host        string         `json:"h,omitempty"`
	PID         int            `json:"p,omitempty"`
	Queues      []string       `json:"q,omitempty"`
	Concurrency int            `json:"c,omitempty"`
	StartedAt   int64          `json:"s,omitempty"` // ms
	Running     map[string]int `json:"r,omitempty"`
	Reserved    map[string]int `json:"v,omitempty"`
	MaxAttempts int            `json:"m,omitempty"`
}

// Heartbeat creates or refreshes the registry entry w.ID, with LastSeen
// the server's time and the jobs w holds (replacing those of its last
// heartbeat), in one script that also drops entries not seen for two
// minutes. It writes the buffered run metrics too when the last write is
// a second old or more; a failed write keeps them for the next one and
// does not fail the heartbeat.
func (q *Queue) Heartbeat(ctx context.Context, w driver.WorkerInfo) error {
	doing := "recording heartbeat of worker " + w.ID
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	if w.StartedAt.IsZero() {
		w.StartedAt = time.Now()
	}
	rec, err := json.Marshal(workerRecord{Host: w.Host, PID: w.PID, Queues: w.Queues, Concurrency: w.Concurrency,
		StartedAt: millis(w.StartedAt), Running: held(w.Running), Reserved: held(w.Reserved), MaxAttempts: w.MaxAttempts})
	if err != nil {
		return fmt.Errorf("redisqueue: %s: %w", doing, err)
	}
	if err := heartbeatScript.Run(ctx, q.rdb, []string{q.workersKey(), q.seenKey()}, w.ID, rec, workerTTL.Milliseconds()).Err(); err != nil {
		return wrap(doing, err)
	}
	q.report.mu.Lock()
	due := len(q.report.m) > 0 && time.Since(q.report.lastFlush) >= metricsFlushIn
	q.report.mu.Unlock()
	if due {
		q.flushMetricsLogged(ctx)
	}
	return nil
}

// held keeps the positive counts of m; nil when none is.
func held(m map[string]int) map[string]int {
	var out map[string]int
	for k, n := range m {
		if n > 0 {
			if out == nil {
				out = make(map[string]int, len(m))
			}
			out[k] = n
		}
	}
	return out
}

// Deregister removes the registry entry id, and writes the buffered run
// metrics.
func (q *Queue) Deregister(ctx context.Context, id string) error {
	doing := "deregistering worker " + id
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, q.workersKey(), id)
		p.ZRem(ctx, q.seenKey(), id)
		p.SRem(ctx, q.fleetPausedKey(), id)
		p.SRem(ctx, q.fleetTermKey(), id)
		return nil
	})
	if err != nil {
		return wrap(doing, err)
	}
	q.flushMetricsLogged(ctx)
	return nil
}

// Workers lists the entries seen within the last two minutes, sorted by
// ID, at most 1,000.
func (q *Queue) Workers(ctx context.Context) ([]driver.WorkerInfo, error) {
	const doing = "listing workers"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	out, err := workersScript.RunRO(ctx, q.rdb, []string{q.workersKey(), q.seenKey()}, workerTTL.Milliseconds(), maxWorkers).Slice()
	if err != nil {
		return nil, wrap(doing, err)
	}
	var ws []driver.WorkerInfo
	for k := 0; k+2 < len(out); k += 3 {
		id, _ := out[k].(string)
		seen, _ := out[k+1].(string)
		raw, _ := out[k+2].(string)
		var rec workerRecord
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			q.log.Warn("redisqueue: a worker's registry entry is not valid JSON; listed without it", "prefix", q.prefix, "worker", id, "err", err)
		}
		ws = append(ws, driver.WorkerInfo{ID: id, Host: rec.Host, PID: rec.PID, Queues: rec.Queues, Concurrency: rec.Concurrency,
			StartedAt: time.UnixMilli(rec.StartedAt), LastSeen: timeOrZero(seen), Running: rec.Running, Reserved: rec.Reserved,
			MaxAttempts: rec.MaxAttempts})
	}
	slices.SortFunc(ws, func(a, b driver.WorkerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return ws, nil
}

// ObserveRun records one finished attempt in the Queue's buffer of run
// metrics, summed by queue and minute, without I/O. The next heartbeat
// at least a second after the last write (or Deregister, FlushMetrics,
// QueueStats, Metrics, Close) adds the buffer to the metrics hashes in
// one script, so every process reads the same sums. Safe for concurrent
// use.
func (q *Queue) ObserveRun(r driver.RunRecord) {
	start := r.Start
	if start.IsZero() {
		start = time.Now()
	}
	name := r.Queue
	if name == "" {
		name = driver.DefaultQueue
	}
	a := metricAgg{runtimeTotal: r.Runtime.Microseconds(), runtimeMax: r.Runtime.Microseconds(), waitTotl: max(r.Wait.Microseconds(), 0)}
	if r.Outcome == driver.OutcomeDone {
		a.processed = 1
	} else {
		a.failed = 1
	}
	k := metricKey{queue: name, minute: start.Truncate(time.Minute).Unix()}
	q.report.mu.Lock()
	q.report.addLocked(k, a)
	q.report.mu.Unlock()
}

// metricsKey is the hash of queue name's metrics of the hour that starts
// at hour (Unix seconds).
func (q *Queue) metricsKey(name string, hour int64) string {
	return q.base(name) + ":m:" + strconv.FormatInt(hour, 10)
}

// FlushMetrics writes the buffered run metrics now, in one script. On
// error they stay buffered for the next write.
func (q *Queue) FlushMetrics(ctx context.Context) error {
	const doing = "writing run metrics"
	q.report.mu.Lock()
	batch := q.report.m
	q.report.m = nil
	q.report.lastFlush = time.Now()
	q.report.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := q.writeMetrics(ctx, batch); err != nil {
		q.report.mu.Lock()
		for k, a := range batch {
			q.report.addLocked(k, *a)
		}
		q.report.mu.Unlock()
		return wrap(doing, err)
	}
	return nil
}

// flushMetricsLogged writes the buffered metrics for a call that does not
// fail when that fails: the records stay buffered and the error is
// logged.
func (q *Queue) flushMetricsLogged(ctx context.Context) {
	if err := q.FlushMetrics(ctx); err != nil && ctx.Err() == nil {
		q.log.Warn("redisqueue: writing run metrics failed; kept for the next write", "prefix", q.prefix, "err", err)
	}
}

// Metrics returns the per-minute metrics of every queue from since
// (truncated to the minute, at most seven days back) to now, oldest
// first, with this process's buffered ones written first: one HGETALL
// per queue and hour.
func (q *Queue) Metrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error) {
	const doing = "reading metrics"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	q.flushMetricsLogged(ctx)
	points, err := q.metrics(ctx, since, time.Now())
	if err != nil {
		return nil, wrap(doing, err)
	}
	return points, nil
}

// metrics reads the points of every queue from since to now.
func (q *Queue) metrics(ctx context.Context, since, now time.Time) ([]driver.MetricPoint, error) {
	if oldest := now.Add(-metricsRetention); since.Before(oldest) {
		since = oldest
	}
	since = since.Truncate(time.Minute)
	names, err := q.names(ctx, "")
	if err != nil || len(names) == 0 {
		return nil, err
	}
	from := since.Unix()
	first := from - from%3600
	type read struct {
		name string
		hour int64
		cmd  *redis.MapStringStringCmd
	}
	var reads []read
	pipe := q.rdb.Pipeline()
	for _, name := range names {
		for h := first; h <= now.Unix(); h += 3600 {
			reads = append(reads, read{name, h, pipe.HGetAll(ctx, q.metricsKey(name, h))})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var out []driver.MetricPoint
	for _, r := range reads {
		byMinute := map[int64]*driver.MetricPoint{}
		for field, val := range r.cmd.Val() {
			i := strings.IndexFunc(field, func(c rune) bool { return c < '0' || c > '9' })
			if i <= 0 {
				continue
			}
			m, _ := strconv.ParseInt(field[:i], 10, 64)
			n, _ := strconv.ParseInt(val, 10, 64)
			minute := r.hour + 60*m
			if minute < from {
				continue
			}
			p := byMinute[minute]
			if p == nil {
				p = &driver.MetricPoint{Queue: r.name, Minute: time.Unix(minute, 0).UTC()}
				byMinute[minute] = p
			}
			switch field[i:] {
			case "p":
				p.Processed = n
			case "f":
				p.Failed = n
			case "rt":
				p.TotalRuntime = time.Duration(n) * time.Microsecond
			case "rm":
				p.MaxRuntime = time.Duration(n) * time.Microsecond
			case "wt":
				p.TotalWait = time.Duration(n) * time.Microsecond
			}
		}
		for _, p := range byMinute {
			out = append(out, *p)
		}
	}
	slices.SortFunc(out, func(a, b driver.MetricPoint) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Queue, b.Queue))
	})
	return out, nil
}

// writeMetrics adds batch to the metrics hashes: in one script on a
// standalone server, which also registers the queues; on a Cluster one
// script per queue, the queues registered first (cluster.go).
func (q *Queue) writeMetrics(ctx context.Context, batch map[metricKey]*metricAgg) error {
	run := func(keys []metricKey, fixed string, register string) error {
		ks := newKeyset(fixed)
		args := []any{register}
		for _, k := range keys {
			a := batch[k]
			hour := k.minute - k.minute%3600
			expire := (hour+3600)*1000 + metricsRetention.Milliseconds()
			args = append(args, ks.of(q.metricsKey(k.queue, hour)), k.queue, (k.minute-hour)/60,
				a.processed, a.failed, a.runtimeTotal, a.runtimeMax, a.waitTotl, expire)
		}
		return flushMetricsScript.Run(ctx, q.rdb, ks.keys, args...).Err()
	}
	keys := slices.Collect(maps.Keys(batch))
	if !q.cluster {
		return run(keys, q.queues, "1")
	}
	names, groups := byQueue(len(keys), func(i int) string { return keys[i].queue })
	if err := q.register(ctx, names...); err != nil {
		return err
	}
	for _, n := range names {
		part := make([]metricKey, len(groups[n]))
		for k, i := range groups[n] {
			part[k] = keys[i]
		}
		// The first key is the queue's ID index, never written here:
		// KEYS[1] must be of the queue's slot.
		if err := run(part, q.idsKey(q.base(n)), "0"); err != nil {
			return err
		}
	}
	return nil
}
