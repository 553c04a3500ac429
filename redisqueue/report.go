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
//	                        (Unix seconds of its start), fields <minute><stat>[.<job name>]
//	base:mh:<day>           hash: the same by hour of one day, fields <hour><stat>[.<job name>]
//
// A stat is p, f, rt, rm or wt (processed, failed, total and max runtime
// and total wait, µs) or b0 to b23, the runtime buckets of
// driver.RuntimeHistogram (only those that count something). A field
// without a job name is the queue's runs recorded without one (or by a
// release before job names). A minute hash expires minuteRetention after
// its hour ends, a day's hash metricsRetention after the day ends. A
// heartbeat drops the registry entries not seen within workerTTL (a
// hundred at a time); Workers lists only those seen within it.

// Bounds of the registry and the metrics.
const (
	workerTTL        = 2 * time.Minute
	maxWorkers       = 1000 // the most entries Workers lists
	metricsRetention = driver.MetricsRetention
	minuteRetention  = 24 * time.Hour
	// metricsFlushIn is the least time between two writes of the
	// buffered metrics that a heartbeat makes.
	metricsFlushIn = time.Second
	// maxMetricKeys bounds the buffer: the (queue, job name, minute or
	// hour) keys it holds; records of new keys beyond it are dropped
	// until a flush.
	maxMetricKeys = 10000
)

// metricKey is one queue's job name in one minute or hour.
type metricKey struct {
	span  int64 // 60 or 3600
	at    int64 // Unix seconds of its start
	queue string
	name  string
}

// reporter is the Queue's buffer of run metrics not yet written.
type reporter struct {
	mu        sync.Mutex
	m         map[metricKey]*driver.MetricPoint
	lastFlush time.Time
	flushes   int // writes made, for tests
}

func (r *reporter) addLocked(k metricKey, p driver.MetricPoint) {
	if r.m == nil {
		r.m = make(map[metricKey]*driver.MetricPoint)
	}
	cur := r.m[k]
	if cur == nil {
		if len(r.m) >= maxMetricKeys {
			return
		}
		cur = &driver.MetricPoint{}
		r.m[k] = cur
	}
	cur.Add(p)
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
// metrics, summed by queue, job name and minute, and by hour, without I/O
// (two map updates under a mutex). The next heartbeat at least a second
// after the last write (or Deregister, FlushMetrics, QueueStats, Metrics,
// HourlyMetrics, Close) adds the buffer to the metrics hashes in one
// script, so every process reads the same sums: never one write per job.
// Safe for concurrent use.
func (q *Queue) ObserveRun(r driver.RunRecord) {
	start := r.Start
	if start.IsZero() {
		start = time.Now()
	}
	name := r.Queue
	if name == "" {
		name = driver.DefaultQueue
	}
	var p driver.MetricPoint
	p.Observe(r)
	at := start.Unix()
	q.report.mu.Lock()
	q.report.addLocked(metricKey{span: 60, at: at - mod(at, 60), queue: name, name: r.Name}, p)
	q.report.addLocked(metricKey{span: 3600, at: at - mod(at, 3600), queue: name, name: r.Name}, p)
	q.report.mu.Unlock()
}

// mod is a modulo that is never negative.
func mod(a, b int64) int64 { return ((a % b) + b) % b }

// metricsKey is the hash of queue name's metrics of the hour that starts
// at hour (Unix seconds).
func (q *Queue) metricsKey(name string, hour int64) string {
	return q.base(name) + ":m:" + strconv.FormatInt(hour, 10)
}

// hourlyKey is the hash of queue name's hourly metrics of the day that
// starts at day (Unix seconds).
func (q *Queue) hourlyKey(name string, day int64) string {
	return q.base(name) + ":mh:" + strconv.FormatInt(day, 10)
}

// pointHash returns the hash that holds the point of k, its field prefix
// (the minute within the hour, or the hour within the day) and when the
// hash expires (ms).
func (q *Queue) pointHash(k metricKey) (key, prefix string, expire int64) {
	if k.span == 60 {
		hour := k.at - mod(k.at, 3600)
		return q.metricsKey(k.queue, hour), strconv.FormatInt((k.at-hour)/60, 10), (hour+3600)*1000 + minuteRetention.Milliseconds()
	}
	day := k.at - mod(k.at, 86400)
	return q.hourlyKey(k.queue, day), strconv.FormatInt((k.at-day)/3600, 10), (day+86400)*1000 + metricsRetention.Milliseconds()
}

// FlushMetrics writes the buffered run metrics now, in one script (one
// per queue on a Cluster). On
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
		for k, p := range batch {
			q.report.addLocked(k, *p)
		}
		q.report.mu.Unlock()
		return wrap(doing, err)
	}
	q.report.mu.Lock()
	q.report.flushes++
	q.report.mu.Unlock()
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

// Metrics returns the per-minute metrics of every queue and job name
// from since (truncated to the minute, at most a day back) to now, oldest
// first, then by queue and name, with this process's buffered ones
// written first: one HGETALL per queue and hour.
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

// HourlyMetrics returns the hourly metrics of every queue and job name
// from since (truncated to the hour, at most seven days back) to now,
// oldest first, then by queue and name, with this process's buffered
// ones written first: one HGETALL per queue and day.
func (q *Queue) HourlyMetrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error) {
	const doing = "reading hourly metrics"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	q.flushMetricsLogged(ctx)
	points, err := q.readPoints(ctx, 3600, since, time.Now())
	if err != nil {
		return nil, wrap(doing, err)
	}
	return points, nil
}

// metrics reads the per-minute points of every queue from since to now.
func (q *Queue) metrics(ctx context.Context, since, now time.Time) ([]driver.MetricPoint, error) {
	return q.readPoints(ctx, 60, since, now)
}

// readPoints reads the points of span seconds (60 or 3600) of every
// queue from since to now, within their retention.
func (q *Queue) readPoints(ctx context.Context, span int64, since, now time.Time) ([]driver.MetricPoint, error) {
	keep, per := minuteRetention, int64(3600) // a minute hash holds an hour
	if span == 3600 {
		keep, per = metricsRetention, 86400 // an hourly hash holds a day
	}
	if oldest := now.Add(-keep); since.Before(oldest) {
		since = oldest
	}
	names, err := q.names(ctx, "")
	if err != nil || len(names) == 0 {
		return nil, err
	}
	from := since.Unix() - mod(since.Unix(), span)
	first := from - mod(from, per)
	type read struct {
		name  string
		start int64
		cmd   *redis.MapStringStringCmd
	}
	var reads []read
	pipe := q.rdb.Pipeline()
	for _, name := range names {
		for h := first; h <= now.Unix(); h += per {
			key := q.metricsKey(name, h)
			if span == 3600 {
				key = q.hourlyKey(name, h)
			}
			reads = append(reads, read{name, h, pipe.HGetAll(ctx, key)})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	type at struct {
		t    int64
		name string
	}
	var out []driver.MetricPoint
	for _, r := range reads {
		points := map[at]*driver.MetricPoint{}
		for field, val := range r.cmd.Val() {
			i := strings.IndexFunc(field, func(c rune) bool { return c < '0' || c > '9' })
			if i <= 0 {
				continue
			}
			m, _ := strconv.ParseInt(field[:i], 10, 64)
			n, _ := strconv.ParseInt(val, 10, 64)
			t := r.start + span*m
			if t < from {
				continue
			}
			stat, job, _ := strings.Cut(field[i:], ".")
			p := points[at{t, job}]
			if p == nil {
				p = &driver.MetricPoint{Queue: r.name, Name: job, Minute: time.Unix(t, 0).UTC()}
				points[at{t, job}] = p
			}
			switch stat {
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
			default:
				if b, err := strconv.Atoi(strings.TrimPrefix(stat, "b")); err == nil && strings.HasPrefix(stat, "b") && b >= 0 && b < driver.RuntimeBuckets {
					p.Runtimes[b] = n
				}
			}
		}
		for _, p := range points {
			out = append(out, *p)
		}
	}
	slices.SortFunc(out, func(a, b driver.MetricPoint) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// writeMetrics adds batch to the metrics hashes: in one script on a
// standalone server, which also registers the queues; on a Cluster one
// script per queue, the queues registered first (cluster.go).
func (q *Queue) writeMetrics(ctx context.Context, batch map[metricKey]*driver.MetricPoint) error {
	run := func(keys []metricKey, fixed string, register string) error {
		ks := newKeyset(fixed)
		args := []any{register}
		for _, k := range keys {
			p := batch[k]
			key, prefix, expire := q.pointHash(k)
			suffix := ""
			if k.name != "" {
				suffix = "." + k.name
			}
			args = append(args, ks.of(key), k.queue, prefix, suffix, p.Processed, p.Failed,
				p.TotalRuntime.Microseconds(), p.MaxRuntime.Microseconds(), p.TotalWait.Microseconds())
			for _, c := range p.Runtimes {
				args = append(args, c)
			}
			args = append(args, expire)
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
