package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The JSON API: the same reads as the pages, with stable snake_case field
// names that do not follow the Go types (doc.go lists them). Times are RFC
// 3339 in UTC; durations are milliseconds in fields named *_ms; counts that
// a driver caps are {"n": 10000, "more": true}.

// apiStats is the body of GET api/stats. Its single-word names (queues,
// totals, queue, processed, failed, pending, throughput, ready, ...) also
// decode into StatsView, as the cookbook reads a snapshot.
type apiStats struct {
	At     time.Time  `json:"at"`
	Queues []apiQueue `json:"queues"`
	Totals apiQueue   `json:"totals"`
	// Processes is the number of live worker processes, -1 when unknown.
	Processes int `json:"processes"`
	// FailedPastWeek counts the jobs dead-lettered in the last seven
	// days; absent when the driver cannot tell.
	FailedPastWeek *driver.Count `json:"failed_past_7_days,omitempty"`
	// Stale is set when the store did not answer and these figures are
	// the last ones read, at At.
	Stale bool `json:"stale,omitempty"`
}

type apiQueue struct {
	Queue     string       `json:"queue"`
	Paused    bool         `json:"paused"`
	Pending   int64        `json:"pending"`
	Ready     driver.Count `json:"ready"`
	Scheduled driver.Count `json:"scheduled"`
	Running   driver.Count `json:"running"`
	Dead      driver.Count `json:"dead"`
	Done      driver.Count `json:"done"`
	Cancelled driver.Count `json:"cancelled"`
	Pushed    int64        `json:"pushed"`
	Retried   int64        `json:"retried"`
	Processed int64        `json:"processed"`
	Failed    int64        `json:"failed"`
	// Throughput is per second, JobsPerMinute per minute.
	Throughput    float64 `json:"throughput"`
	JobsPerMinute float64 `json:"jobs_per_minute"`
	WindowSeconds float64 `json:"window_seconds"`
	AvgRuntimeMS  float64 `json:"avg_runtime_ms"`
	MaxRuntimeMS  float64 `json:"max_runtime_ms"`
	AvgWaitMS     float64 `json:"avg_wait_ms"`
	// MaxWaitMS is how long the oldest ready job has waited (0: none
	// ready, or unknown); OldestReadyAt when its wait began.
	MaxWaitMS     float64    `json:"max_wait_ms"`
	OldestReadyAt *time.Time `json:"oldest_ready_at,omitempty"`
	// Unserved is set when the queue has ready jobs and no live worker
	// serves it.
	Unserved bool `json:"unserved,omitempty"`
	// Warnings are the Warnings option's lines for the queue.
	Warnings []string `json:"warnings,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func toAPIQueue(q QueueStats, at time.Time) apiQueue {
	var oldest *time.Time
	if !q.OldestReady.IsZero() {
		t := q.OldestReady.UTC()
		oldest = &t
	}
	return apiQueue{
		Queue: q.Queue, Paused: q.Paused, Pending: q.Pending,
		Ready: q.Ready, Scheduled: q.Scheduled, Running: q.Running, Dead: q.Dead,
		Done: q.Done, Cancelled: q.Cancelled,
		MaxWaitMS: ms(q.MaxWait(at)), OldestReadyAt: oldest, Unserved: q.Unserved,
		Pushed: q.Pushed, Retried: q.Retried, Processed: q.Processed, Failed: q.Failed,
		Throughput: q.Throughput, JobsPerMinute: q.JobsPerMinute,
		WindowSeconds: q.Window.Seconds(),
		AvgRuntimeMS:  ms(q.AvgRuntime), MaxRuntimeMS: ms(q.MaxRuntime), AvgWaitMS: ms(q.AvgWait),
	}
}

func toAPIStats(sv StatsView) apiStats {
	a := apiStats{At: utc(sv.At), Queues: make([]apiQueue, 0, len(sv.Queues)), Totals: toAPIQueue(sv.Totals, sv.At),
		Processes: sv.Processes, FailedPastWeek: sv.FailedPastWeek, Stale: sv.Stale}
	for _, q := range sv.Queues {
		a.Queues = append(a.Queues, toAPIQueue(q, sv.At))
	}
	return a
}

// apiJob is a job in GET api/jobs and api/jobs/{id}. The lease token is
// never shown.
type apiJob struct {
	ID    string          `json:"id"`
	Queue string          `json:"queue"`
	Name  string          `json:"name"`
	State driver.JobState `json:"state"`
	// Payload is the payload itself when it is valid JSON; otherwise it is
	// omitted and PayloadBase64 holds the bytes.
	Payload       json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64 []byte            `json:"payload_base64,omitempty"`
	Priority      int               `json:"priority"`
	Attempts      int               `json:"attempts"`
	MaxAttempts   int               `json:"max_attempts"` // 0: the worker's MaxRetry applies
	TimeoutMS     float64           `json:"timeout_ms,omitempty"`
	UniqueKey     string            `json:"unique_key,omitempty"`
	Tags          []string          `json:"tags"`
	Meta          map[string]string `json:"meta,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	CreatedAt     time.Time         `json:"created_at,omitzero"`
	AvailableAt   time.Time         `json:"available_at,omitzero"`
	UpdatedAt     time.Time         `json:"updated_at,omitzero"`
	FinishedAt    time.Time         `json:"finished_at,omitzero"`
	LeaseExpires  time.Time         `json:"lease_expires_at,omitzero"`
	// StartedAt and Worker are the latest attempt's start and worker;
	// History the failed attempts, oldest first (api/jobs/{id} only),
	// where the driver records them.
	StartedAt time.Time    `json:"started_at,omitzero"`
	Worker    string       `json:"worker,omitempty"`
	History   []apiAttempt `json:"history,omitempty"`
	// Actions are what operators changed (retry, run now, dispatch),
	// oldest first (api/jobs/{id} only).
	Actions []apiJobAction `json:"actions,omitempty"`
}

// apiJobAction is one operator action on a job.
type apiJobAction struct {
	At   time.Time `json:"at"`
	By   string    `json:"by"`
	What string    `json:"what"`
}

// apiAttempt is one failed attempt of a job.
type apiAttempt struct {
	Attempt   int       `json:"attempt"`
	StartedAt time.Time `json:"started_at,omitzero"`
	RuntimeMS float64   `json:"runtime_ms"`
	Error     string    `json:"error"`
	Worker    string    `json:"worker,omitempty"`
}

func toAPIJob(j JobView) apiJob {
	a := apiJob{
		ID: j.ID, Queue: j.QueueName(), Name: j.Name, State: j.State,
		Priority: j.Priority, Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		TimeoutMS: ms(j.Timeout), UniqueKey: j.UniqueKey, Tags: j.Tags, Meta: j.Meta,
		LastError: j.LastError, CreatedAt: utc(j.CreatedAt), AvailableAt: utc(j.AvailableAt),
		UpdatedAt: utc(j.UpdatedAt), FinishedAt: utc(j.FinishedAt), LeaseExpires: utc(j.LeaseExpiresAt),
		StartedAt: utc(j.StartedAt), Worker: j.Worker,
	}
	for _, h := range j.History {
		a.History = append(a.History, apiAttempt{Attempt: h.Attempt, StartedAt: utc(h.Started), RuntimeMS: ms(h.Runtime), Error: h.Error, Worker: h.Worker})
	}
	for _, x := range j.Actions {
		a.Actions = append(a.Actions, apiJobAction{At: utc(x.At), By: x.By, What: x.What})
	}
	if a.Tags == nil {
		a.Tags = []string{}
	}
	if json.Valid(j.Payload) {
		a.Payload = json.RawMessage(j.Payload)
	} else {
		a.PayloadBase64 = j.Payload
		if a.PayloadBase64 == nil {
			a.PayloadBase64 = []byte{}
		}
	}
	return a
}

// apiJobs is the body of GET api/jobs.
type apiJobs struct {
	State driver.JobState `json:"state"`
	Jobs  []apiJob        `json:"jobs"`
	// Next is the cursor of the following page (pass it as after=);
	// NextPage the number of the following page in cookbook mode (page=).
	Next     string `json:"next,omitempty"`
	NextPage int    `json:"next_page,omitempty"`
	// Scanned is set when a payload search stopped at its row bound
	// before it filled the page: how many jobs it examined; next then
	// continues the search after them.
	Scanned int `json:"scanned,omitempty"`
	// SearchIndex is set on a payload search: "on" when the store's
	// payload search index answered it, "off" when the store has none
	// and the search scanned; absent for a store that keeps no index.
	SearchIndex string `json:"search_index,omitempty"`
}

// apiJobsEnd is the last line of an api/jobs answer in NDJSON (Accept:
// application/x-ndjson): after one line per job, where the list ended,
// as apiJobs says it.
type apiJobsEnd struct {
	End         bool            `json:"end"` // always true: this line ends the answer
	State       driver.JobState `json:"state"`
	Next        string          `json:"next,omitempty"`
	NextPage    int             `json:"next_page,omitempty"`
	Scanned     int             `json:"scanned,omitempty"`
	SearchIndex string          `json:"search_index,omitempty"`
	// Error is set when a store error stopped a payload search after its
	// first call: the jobs sent are what it had found, and next goes on
	// from where it stopped.
	Error string `json:"error,omitempty"`
}

// apiMetrics is the body of GET api/metrics.
type apiMetrics struct {
	Window      string     `json:"window"`
	StepSeconds int        `json:"step_seconds"`
	Since       time.Time  `json:"since"`
	Points      []apiPoint `json:"points"`
	// Queues and Jobs are the points summed per queue and per job name
	// (job class), with runtime percentiles.
	Queues []apiSeries `json:"queues"`
	Jobs   []apiSeries `json:"jobs"`
}

// apiSeries is one queue's or job name's figures over the window, and
// its steps that have runs.
type apiSeries struct {
	Name string `json:"name"`
	apiFigures
	Points []apiStep `json:"points"`
}

type apiFigures struct {
	Processed    int64   `json:"processed"`
	Failed       int64   `json:"failed"`
	P50RuntimeMS float64 `json:"p50_runtime_ms"`
	P95RuntimeMS float64 `json:"p95_runtime_ms"`
	MaxRuntimeMS float64 `json:"max_runtime_ms"`
}

type apiStep struct {
	At time.Time `json:"at"`
	apiFigures
}

func figuresOf(p driver.MetricPoint) apiFigures {
	return apiFigures{Processed: p.Processed, Failed: p.Failed, P50RuntimeMS: ms(p50(p)), P95RuntimeMS: ms(p95(p)), MaxRuntimeMS: ms(p.MaxRuntime)}
}

func apiSeriesOf(ss []*metricSeries, w metricsWindow) []apiSeries {
	out := make([]apiSeries, len(ss))
	for i, s := range ss {
		out[i] = apiSeries{Name: s.Name, apiFigures: figuresOf(s.Total), Points: []apiStep{}}
		for j, p := range s.Slots {
			if p.Processed+p.Failed > 0 {
				out[i].Points = append(out[i].Points, apiStep{At: s.Start.Add(time.Duration(j) * w.Step), apiFigures: figuresOf(p)})
			}
		}
	}
	return out
}

type apiPoint struct {
	Queue          string    `json:"queue"`
	Name           string    `json:"name"`
	Minute         time.Time `json:"minute"`
	Processed      int64     `json:"processed"`
	Failed         int64     `json:"failed"`
	TotalRuntimeMS float64   `json:"total_runtime_ms"`
	MaxRuntimeMS   float64   `json:"max_runtime_ms"`
	TotalWaitMS    float64   `json:"total_wait_ms"`
	// Runtimes are the runtime buckets of driver.RuntimeHistogram.
	Runtimes []int64 `json:"runtimes"`
}

// apiWorkers is the body of GET api/workers.
type apiWorkers struct {
	Workers []apiWorker `json:"workers"`
	// FleetPaused is set while the whole fleet is paused (FleetSource);
	// absent when the workers cannot be commanded.
	FleetPaused *bool `json:"fleet_paused,omitempty"`
}

type apiWorker struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Queues      []string  `json:"queues"`
	Concurrency int       `json:"concurrency"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	LastSeen    time.Time `json:"last_seen,omitzero"`
	Stale       bool      `json:"stale"` // not seen for a minute
	// Running and Reserved are the jobs the worker held at its last
	// heartbeat, by queue ({} when none): in handlers, and leased but in
	// no handler (prefetched, or awaiting their ack flush).
	Running  map[string]int `json:"running"`
	Reserved map[string]int `json:"reserved"`
	// Paused is set while the worker is paused, by the fleet's pause or
	// its own (FleetSource).
	Paused bool `json:"paused"`
	// MaxAttempts is the attempt limit the worker applies to jobs that
	// carry none of their own (driver.WorkerInfo.MaxAttempts); 0 when it
	// did not report one.
	MaxAttempts int `json:"max_attempts"`
}

func (h *handler) apiStats(w http.ResponseWriter, r *http.Request) {
	sv, err := h.src.Figures(r.Context())
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	a := toAPIStats(sv)
	warn := h.warnings(r.Context())
	for i := range a.Queues {
		a.Queues[i].Warnings = warn[a.Queues[i].Queue]
	}
	writeJSON(w, a)
}

func (h *handler) apiJobs(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	if msg := unknownParam(v, jobsParams); msg != "" {
		h.apiStatus(w, http.StatusBadRequest, msg)
		return
	}
	st := driver.JobState(v.Get("state"))
	if st == "failed" {
		st = queue.StateDead
	}
	if !slices.Contains(h.states(), st) {
		if v.Has("state") {
			h.apiStatus(w, http.StatusBadRequest, "unknown state: use "+strings.Join(stateWords(h.states()), ", "))
			return
		}
		st = queue.StateDead
	}
	q, _ := readQuery(r, st)
	q.Limit, _ = strconv.Atoi(v.Get("limit"))
	q.Limit = min(max(q.Limit, 0), maxBulk)
	if err := checkSearch(q.Search); err != nil {
		h.apiStatus(w, http.StatusBadRequest, err.Error())
		return
	}
	if acceptsNDJSON(r) {
		h.apiJobsStream(w, r, q, st)
		return
	}
	res, err := h.listJobs(r.Context(), q)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	out := apiJobs{State: st, Jobs: make([]apiJob, len(res.Jobs)), Next: res.Next, NextPage: res.NextPage, Scanned: res.Scanned}
	if q.Search != "" {
		out.SearchIndex = h.searchIndex(r.Context())
	}
	for i, j := range res.Jobs {
		out.Jobs[i] = toAPIJob(j)
	}
	writeJSON(w, out)
}

func (h *handler) apiJob(w http.ResponseWriter, r *http.Request) {
	j, err := h.getJob(r.Context(), r.PathValue("id"))
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	writeJSON(w, toAPIJob(j))
}

func (h *handler) apiMetrics(w http.ResponseWriter, r *http.Request) {
	if !h.src.Abilities().Charts {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	win, err := windowOf(r.URL.Query().Get("window"))
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	now := time.Now()
	pts, err := h.windowPoints(r.Context(), win, now)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	qs, js := seriesOf(pts, win, now)
	out := apiMetrics{
		Window: win.Name, StepSeconds: int(win.Step / time.Second), Since: now.Add(-win.Span).UTC().Truncate(win.Step),
		Points: make([]apiPoint, len(pts)), Queues: apiSeriesOf(qs, win), Jobs: apiSeriesOf(js, win),
	}
	for i, p := range pts {
		out.Points[i] = apiPoint{
			Queue: p.Queue, Name: p.Name, Minute: utc(p.Minute), Processed: p.Processed, Failed: p.Failed,
			TotalRuntimeMS: ms(p.TotalRuntime), MaxRuntimeMS: ms(p.MaxRuntime), TotalWaitMS: ms(p.TotalWait),
			Runtimes: p.Runtimes[:],
		}
	}
	writeJSON(w, out)
}

// nonNil is m, or an empty map for nil, so that JSON shows {} not null.
func nonNil(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

func (h *handler) apiWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := h.src.Workers(r.Context())
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	out := apiWorkers{Workers: make([]apiWorker, len(ws))}
	paused := map[string]bool{}
	if fs := h.fleetOf(); fs != nil {
		fleet, ids, err := fs.PausedWorkers(r.Context())
		if err != nil {
			h.apiError(w, r, err)
			return
		}
		out.FleetPaused = &fleet
		for _, id := range ids {
			paused[id] = true
		}
	}
	for i, wi := range ws {
		qs := wi.Queues
		if qs == nil {
			qs = []string{}
		}
		out.Workers[i] = apiWorker{
			ID: wi.ID, Host: wi.Host, PID: wi.PID, Queues: qs, Concurrency: wi.Concurrency,
			StartedAt: utc(wi.StartedAt), LastSeen: utc(wi.LastSeen), Stale: time.Since(wi.LastSeen) > staleAfter,
			Running: nonNil(wi.Running), Reserved: nonNil(wi.Reserved),
			Paused:      paused[wi.ID] || (out.FleetPaused != nil && *out.FleetPaused),
			MaxAttempts: wi.MaxAttempts,
		}
	}
	writeJSON(w, out)
}

// acceptsNDJSON reports whether r's Accept header names
// application/x-ndjson.
func acceptsNDJSON(r *http.Request) bool {
	for _, a := range r.Header.Values("Accept") {
		for _, m := range strings.Split(a, ",") {
			m, _, _ = strings.Cut(m, ";")
			if strings.EqualFold(strings.TrimSpace(m), "application/x-ndjson") {
				return true
			}
		}
	}
	return false
}

// apiJobsStream answers api/jobs in NDJSON: one line per job, written
// and flushed as the list, or a payload search window by window
// (searchOn), reads them, then an apiJobsEnd line. An error of the
// store's first call is the usual JSON error with its status; one after
// the answer began is the end line's error. A client that goes away
// stops the search, and the answer ends there, without an end line.
func (h *handler) apiJobsStream(w http.ResponseWriter, r *http.Request, q ListQuery, st driver.JobState) {
	ctx := r.Context()
	first, err := h.src.List(ctx, q)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(jobs []JobView) error {
		for _, j := range jobs {
			if err := enc.Encode(toAPIJob(hide(j))); err != nil {
				return err
			}
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	if send(first.Jobs) != nil {
		return
	}
	last, stopped := first, error(nil)
	if q.Search != "" {
		last, stopped = h.searchOn(ctx, q, first, func(more JobList) error { return send(more.Jobs) })
		if ctx.Err() != nil {
			return
		}
	}
	end := apiJobsEnd{End: true, State: st, Next: last.Next, NextPage: first.NextPage, Scanned: last.Scanned}
	if q.Search != "" {
		end.SearchIndex = h.searchIndex(ctx)
	}
	if stopped != nil {
		h.cfg.logger.Error("dashboard: the payload search stopped", "path", r.URL.Path, "err", stopped)
		end.Error = "the search stopped: the store failed; the server log has the details"
	}
	_ = enc.Encode(end)
}
