package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// decode parses an API body into a generic value.
func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, body)
	}
	return m
}

// sameKeys checks an object's field names against want.
func sameKeys(t *testing.T, what string, obj any, want ...string) {
	t.Helper()
	m, ok := obj.(map[string]any)
	if !ok {
		t.Errorf("%s is %T, want an object", what, obj)
		return
	}
	got := slices.Sorted(maps.Keys(m))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s fields = %v, want %v", what, got, want)
	}
}

// isTime checks an RFC 3339 UTC time.
func isTime(t *testing.T, what string, v any) {
	t.Helper()
	s, _ := v.(string)
	if ts, err := time.Parse(time.RFC3339Nano, s); err != nil || !strings.HasSuffix(s, "Z") || ts.IsZero() {
		t.Errorf("%s = %v, want an RFC 3339 UTC time", what, v)
	}
}

var queueFields = []string{
	"queue", "paused", "pending", "ready", "scheduled", "running", "dead", "pushed", "retried",
	"processed", "failed", "throughput", "jobs_per_minute", "window_seconds",
	"avg_runtime_ms", "max_runtime_ms", "avg_wait_ms", "max_wait_ms", "done", "cancelled",
}

// The API's field names are snake_case and fixed: a renamed Go field must
// not change them.
func TestAPIFieldNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	// The failed list is newest first: the binary one last.
	bin := deadJobs(t, q, "emails", 1, "\xff\x00raw", "bad bytes")
	deadJobs(t, q, "emails", 2, `{"user_id":7}`, "smtp down", queue.Tags("vip"))
	j, _ := queue.NewJob(struct{}{}, queue.OnQueue("emails"), queue.Priority(3), queue.Timeout(1500*time.Millisecond),
		queue.Meta("trace", "abc"), queue.MaxAttempts(4))
	if err := q.Push(ctx, j); err != nil {
		t.Fatal(err)
	}
	ok, _ := queue.NewJob(struct{}{}, queue.OnQueue("emails"))
	_ = q.Push(ctx, ok)
	got, err := q.Reserve(ctx, []string{"emails"}, 2, time.Minute)
	if err != nil || len(got) != 2 {
		t.Fatalf("reserve: %v, %d jobs", err, len(got))
	}
	if err := testutil.Ack(ctx, q, got[1].Lease()); err != nil {
		t.Fatal(err)
	}
	// The worker reports its runs to the driver's metrics.
	q.ObserveRun(driver.RunRecord{Queue: "emails", Start: time.Now(), Runtime: 20 * time.Millisecond, Outcome: driver.OutcomeDone})
	now := time.Now()
	if err := q.Heartbeat(ctx, driver.WorkerInfo{ID: "w-1", Host: "box", PID: 9, Queues: []string{"emails"}, Concurrency: 4, StartedAt: now, LastSeen: now, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q))

	st := decode(t, s.page("api/stats").Body)
	sameKeys(t, "stats", st, "at", "queues", "totals", "processes", "failed_past_7_days")
	if st["processes"] != 1.0 {
		t.Errorf("stats.processes = %v, want 1 (the worker that heartbeat)", st["processes"])
	}
	isTime(t, "stats.at", st["at"])
	qs, _ := st["queues"].([]any)
	if len(qs) != 1 {
		t.Fatalf("stats.queues = %v", st["queues"])
	}
	sameKeys(t, "stats.queues[0]", qs[0], queueFields...)
	sameKeys(t, "stats.totals", st["totals"], queueFields...)
	q0 := qs[0].(map[string]any)
	sameKeys(t, "stats.queues[0].dead", q0["dead"], "n")
	if q0["queue"] != "emails" || q0["dead"].(map[string]any)["n"] != 3.0 || q0["window_seconds"] != 3600.0 {
		t.Errorf("stats.queues[0] = %v", q0)
	}

	list := decode(t, s.page("api/jobs?state=failed&limit=2").Body)
	sameKeys(t, "jobs page", list, "state", "jobs", "next")
	if list["state"] != "dead" {
		t.Errorf("state=failed lists %v, want dead", list["state"])
	}
	jobs, _ := list["jobs"].([]any)
	if len(jobs) != 2 {
		t.Fatalf("jobs = %v", list["jobs"])
	}
	sameKeys(t, "dead job", jobs[0], "id", "queue", "name", "state", "payload", "priority", "attempts",
		"max_attempts", "tags", "last_error", "created_at", "available_at", "updated_at", "finished_at", "started_at")
	j0 := jobs[0].(map[string]any)
	if p, _ := j0["payload"].(map[string]any); p["user_id"] != 7.0 {
		t.Errorf("payload = %v, want the job's JSON object", j0["payload"])
	}
	if j0["last_error"] != "smtp down" || !slices.Equal(j0["tags"].([]any), []any{"vip"}) {
		t.Errorf("dead job = %v", j0)
	}
	for _, f := range []string{"created_at", "updated_at", "finished_at"} {
		isTime(t, "job."+f, j0[f])
	}

	raw := decode(t, s.page("api/jobs/"+bin[0]).Body)
	if _, has := raw["payload"]; has || raw["payload_base64"] != "/wByYXc=" {
		t.Errorf("a payload that is not JSON: payload %v, payload_base64 %v", raw["payload"], raw["payload_base64"])
	}
	run := decode(t, s.page("api/jobs/"+got[0].ID).Body)
	// The field list also says the lease token is never shown.
	sameKeys(t, "running job", run, "id", "queue", "name", "state", "payload", "priority", "attempts",
		"max_attempts", "timeout_ms", "tags", "meta", "created_at", "available_at", "updated_at", "lease_expires_at", "started_at")
	if run["timeout_ms"] != 1500.0 || run["priority"] != 3.0 || run["max_attempts"] != 4.0 || run["state"] != "running" {
		t.Errorf("running job = %v", run)
	}

	m := decode(t, s.page("api/metrics").Body)
	sameKeys(t, "metrics", m, "window", "step_seconds", "since", "points", "queues", "jobs")
	isTime(t, "metrics.since", m["since"])
	pts, _ := m["points"].([]any)
	if len(pts) == 0 {
		t.Fatal("no metric points after a run")
	}
	sameKeys(t, "metric point", pts[0], "queue", "name", "minute", "processed", "failed", "total_runtime_ms", "max_runtime_ms", "total_wait_ms", "runtimes")
	mq, _ := m["queues"].([]any)
	if len(mq) == 0 {
		t.Fatal("no queue series after a run")
	}
	sameKeys(t, "metric series", mq[0], "name", "processed", "failed", "p50_runtime_ms", "p95_runtime_ms", "max_runtime_ms", "points")
	steps, _ := mq[0].(map[string]any)["points"].([]any)
	if len(steps) == 0 {
		t.Fatal("no steps in a queue series after a run")
	}
	sameKeys(t, "metric step", steps[0], "at", "processed", "failed", "p50_runtime_ms", "p95_runtime_ms", "max_runtime_ms")

	ws := decode(t, s.page("api/workers").Body)
	sameKeys(t, "workers", ws, "workers", "fleet_paused")
	w0 := ws["workers"].([]any)[0]
	sameKeys(t, "worker", w0, "id", "host", "pid", "queues", "concurrency", "started_at", "last_seen", "stale", "running", "reserved", "paused", "max_attempts")
	if w0.(map[string]any)["max_attempts"] != 3.0 {
		t.Errorf("worker max_attempts = %v, want 3, as its heartbeat reported", w0.(map[string]any)["max_attempts"])
	}

	for p, status := range map[string]int{"api/jobs/nope": 404, "api/jobs?state=bogus": 400, "api/jobs?state=ready&after=zz%21": 400} {
		r := s.get(s.url(p))
		if r.StatusCode != status {
			t.Errorf("%s = %d, want %d", p, r.StatusCode, status)
		}
		sameKeys(t, p, decode(t, r.Body), "error")
	}
	// The page says what is wrong with a link whose cursor is foreign.
	for _, p := range []string{"jobs?state=ready&after=zz%21", "jobs?state=ready&after=zz%21&q=x", "failed?after=zz%21"} {
		r := s.get(s.url(p))
		if r.StatusCode != http.StatusBadRequest || !strings.Contains(r.Body, "first page") {
			t.Errorf("%s = %d, want 400 saying to start from the first page", p, r.StatusCode)
		}
	}
}

// The cookbook reads a stats snapshot into StatsView: its fields (Queue,
// Processed, Failed, Pending, Throughput, Totals) come back from the
// JSON of api/stats.
func TestAPIStatsDecodesIntoStatsView(t *testing.T) {
	t.Parallel()
	stats := dashboard.NewStats()
	for range 3 {
		stats.OnPushed("default")
	}
	stats.OnProcessed("default")
	stats.OnFailed("default")
	failed := dashboard.NewMemoryFailedJobs(nil)
	failed.Record(queue.Job{ID: "x"}, "default", errors.New("boom"))
	s := serve(t, dashboard.NewInspector(stats, failed))
	var sv dashboard.StatsView
	if err := json.Unmarshal([]byte(s.page("api/stats").Body), &sv); err != nil {
		t.Fatal(err)
	}
	if len(sv.Queues) != 1 {
		t.Fatalf("queues = %+v", sv.Queues)
	}
	qs := sv.Queues[0]
	if qs.Queue != "default" || qs.Processed != 1 || qs.Failed != 1 || qs.Pending != 1 || qs.Pushed != 3 || qs.Throughput <= 0 {
		t.Errorf("queue = %+v", qs)
	}
	if sv.Totals.Failed != 1 || sv.Totals.Dead.N != 1 || sv.At.IsZero() {
		t.Errorf("totals = %+v at %v", sv.Totals, sv.At)
	}
}
