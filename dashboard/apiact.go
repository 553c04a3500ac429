package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The JSON API's actions: what the pages' buttons do, for scripts. Each
// answers with JSON and a status that says what happened; repeating an
// action that already took effect answers 200 with "changed": false and
// the job as it is, not an error.

// actRoutes adds the API's job, queue and bulk actions and the OpenAPI
// document to m.
func (h *handler) actRoutes(m *router) {
	m.HandleFunc("POST /queues/api/jobs/{id}/retry", h.apiRetry)
	m.HandleFunc("POST /queues/api/jobs/{id}/forget", h.apiForget)
	m.HandleFunc("POST /queues/api/jobs/{id}/cancel", h.apiCancel)
	m.HandleFunc("POST /queues/api/jobs/{id}/run-now", h.apiRunNow)
	m.HandleFunc("POST /queues/api/jobs/{id}/clone", h.apiClone)
	m.HandleFunc("POST /queues/api/jobs", h.apiDispatch)
	m.HandleFunc("GET /queues/api/job-types", h.apiJobTypes)
	m.HandleFunc("POST /queues/api/jobs/bulk", h.apiBulk)
	m.HandleFunc("POST /queues/api/failed/flush", h.apiFlush)
	m.HandleFunc("POST /queues/api/queues/{name}/pause", h.apiPause)
	m.HandleFunc("POST /queues/api/queues/{name}/resume", h.apiPause)
	m.HandleFunc("GET /queues/api/openapi.json", h.apiOpenAPI)
}

// apiAction is the answer to an action on one job.
type apiAction struct {
	Action string `json:"action"`
	ID     string `json:"id"`
	// Changed is false when the job was already as the action would
	// leave it (a retried job retried again, a cancelled job cancelled).
	Changed bool `json:"changed"`
	// Was is the state a cancel found the job in.
	Was driver.JobState `json:"was,omitempty"`
	// Job is the job after the action, when the Source reads jobs by id
	// (Abilities().Detail) and the job still exists.
	Job *apiJob `json:"job,omitempty"`
	// Error says why the action did not apply (409 only).
	Error string `json:"error,omitempty"`
	// CloneOf names the job a clone copied (action "clone" only; ID is
	// the clone's).
	CloneOf string `json:"clone_of,omitempty"`
}

// current reads job id for an action's answer; nil when the Source cannot
// read jobs by id or the job is gone.
func (h *handler) current(ctx context.Context, id string) (*apiJob, error) {
	if !h.src.Abilities().Detail {
		return nil, nil
	}
	j, err := h.getJob(ctx, id)
	switch {
	case isNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	a := toAPIJob(j)
	return &a, nil
}

// answerAction writes out with status and notes it for the action's log
// line.
func (h *handler) answerAction(w http.ResponseWriter, r *http.Request, status int, out apiAction) {
	note(r, slog.String("job", out.ID), slog.Bool("changed", out.Changed))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// notApplied answers an action the job's state refuses: 200 unchanged
// when the job already is where the action leads (ok), 409 with the job
// otherwise, and 404 when there is no such job.
func (h *handler) notApplied(w http.ResponseWriter, r *http.Request, out apiAction, ok func(driver.JobState) bool, why string, cause error) {
	j, err := h.current(r.Context(), out.ID)
	switch {
	case err != nil:
		h.apiError(w, r, err)
	case j == nil:
		h.apiError(w, r, cause)
	case ok(j.State):
		out.Job = j
		h.answerAction(w, r, http.StatusOK, out)
	default:
		out.Job, out.Error = j, fmt.Sprintf("the job is %s: %s", j.State, why)
		h.answerAction(w, r, http.StatusConflict, out)
	}
}

// waiting is a state in which a job will run without a retry.
func waiting(s driver.JobState) bool { return cancellable(s) }

// apiRetry serves POST api/jobs/{id}/retry, with an optional body
// {"payload": JSON}: the job back to ready, with that payload when given
// (checked against the job's JobType first: 422 when it does not decode,
// or when no JobType names the job). With a Source that offers the job
// actions (Abilities().Amend) a failed, cancelled or done job is retried
// and the change recorded in its history; otherwise only a failed one.
// A job already waiting or running (retried before) answers 200 with
// "changed": false; one whose state refuses a retry 409.
func (h *handler) apiRetry(w http.ResponseWriter, r *http.Request) {
	out := apiAction{Action: "retry", ID: r.PathValue("id")}
	var in struct {
		Payload json.RawMessage `json:"payload"`
	}
	if !h.readBody(w, r, &in) {
		return
	}
	var payload []byte
	if len(in.Payload) > 0 && string(in.Payload) != "null" {
		payload = in.Payload
	}
	var err error
	var was JobView
	if _, ok := h.amender(); ok {
		was, err = h.amendJob(r.Context(), out.ID, driver.AmendRetry, payload)
	} else if payload != nil {
		h.apiStatus(w, http.StatusNotFound, "editing a payload is not available with this queue driver or inspector")
		return
	} else {
		err = h.src.RetryJob(r.Context(), out.ID)
	}
	if h.amendRefused(w, r, &out, err, waiting, "only failed, cancelled and done jobs can be retried") {
		return
	}
	out.Changed, out.Was = true, was.State
	if out.Job, err = h.current(r.Context(), out.ID); err != nil {
		h.apiError(w, r, err)
		return
	}
	h.answerAction(w, r, http.StatusOK, out)
}

// apiRunNow serves POST api/jobs/{id}/run-now: a scheduled job (delayed
// or waiting to be retried) made ready now, recorded in its history. A
// job already ready or running answers 200 with "changed": false; one
// that finished 409.
func (h *handler) apiRunNow(w http.ResponseWriter, r *http.Request) {
	out := apiAction{Action: "run-now", ID: r.PathValue("id")}
	was, err := h.amendJob(r.Context(), out.ID, driver.AmendRunNow, nil)
	due := func(s driver.JobState) bool { return s == queue.StateReady || s == queue.StateRunning }
	if h.amendRefused(w, r, &out, err, due, "only scheduled jobs can be run now") {
		return
	}
	out.Changed, out.Was = true, was.State
	if out.Job, err = h.current(r.Context(), out.ID); err != nil {
		h.apiError(w, r, err)
		return
	}
	h.answerAction(w, r, http.StatusOK, out)
}

// amendRefused answers a job action that did not apply and reports
// true; it reports false for err nil. A payload refused is 422, a state
// that refuses the action goes to notApplied (ok: where the action
// leads), a unique key held by another job 409.
func (h *handler) amendRefused(w http.ResponseWriter, r *http.Request, out *apiAction, err error, ok func(driver.JobState) bool, why string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, errPayload), errors.Is(err, driver.ErrInvalid):
		h.apiStatus(w, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, driver.ErrJobState), isNotFound(err):
		h.notApplied(w, r, *out, ok, why, queue.ErrNotFound)
	case errors.Is(err, queue.ErrDuplicate):
		j, rerr := h.current(r.Context(), out.ID)
		if rerr != nil {
			h.apiError(w, r, rerr)
			return true
		}
		out.Job, out.Error = j, "its unique key is held by another active job: "+err.Error()
		h.answerAction(w, r, http.StatusConflict, *out)
	default:
		h.apiError(w, r, err)
	}
	return true
}

// apiDispatchRequest is the body of POST api/jobs.
type apiDispatchRequest struct {
	Name    string          `json:"name"`  // a type JobType registered
	Queue   string          `json:"queue"` // "" for the type's default
	Payload json.RawMessage `json:"payload"`
}

// apiDispatch serves POST api/jobs: a new job of a registered type
// (JobType), its payload decoded into the type first (422 when it does
// not, or when no JobType has the name). It answers 201 with the job's
// ID and the job as stored, 409 when its unique key is held.
func (h *handler) apiDispatch(w http.ResponseWriter, r *http.Request) {
	var in apiDispatchRequest
	if !h.readBody(w, r, &in) {
		return
	}
	if in.Name == "" || len(in.Payload) == 0 {
		h.apiStatus(w, http.StatusBadRequest, `give "name" (a registered job type: GET api/job-types) and "payload"`)
		return
	}
	j, err := h.dispatchJob(r.Context(), in.Name, clip(in.Queue), in.Payload)
	switch {
	case errors.Is(err, errPayload), errors.Is(err, driver.ErrInvalid):
		h.apiStatus(w, http.StatusUnprocessableEntity, err.Error())
		return
	case errors.Is(err, queue.ErrDuplicate):
		h.apiStatus(w, http.StatusConflict, "not dispatched: "+err.Error())
		return
	case err != nil:
		h.apiError(w, r, err)
		return
	}
	out := apiAction{Action: "dispatch", ID: j.ID, Changed: true}
	if out.Job, err = h.current(r.Context(), j.ID); err != nil {
		h.apiError(w, r, err)
		return
	}
	h.answerAction(w, r, http.StatusCreated, out)
}

// apiClone serves POST api/jobs/{id}/clone: a copy of the job pushed
// under a new ID (driver.CloneOf: same queue, type, payload and options,
// ready now), whatever the job's state, while the store has it (a done or
// cancelled job only while retention keeps it). It answers 201 with the
// clone's ID and the clone as stored, and "clone_of" naming the job
// cloned; 404 for an unknown ID, 409 when the job's unique key is held by
// an active job (cloning a unique job that has not finished is refused
// that way too).
func (h *handler) apiClone(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	_, c, err := h.cloneJob(r.Context(), id)
	switch {
	case isNotFound(err):
		h.apiStatus(w, http.StatusNotFound, "no job "+id+" (a done or cancelled job is kept only while retention is on)")
		return
	case errors.Is(err, driver.ErrInvalid):
		h.apiStatus(w, http.StatusUnprocessableEntity, err.Error())
		return
	case errors.Is(err, queue.ErrDuplicate):
		h.apiStatus(w, http.StatusConflict, "not cloned: its unique key is held by an active job: "+err.Error())
		return
	case err != nil:
		h.apiError(w, r, err)
		return
	}
	out := apiAction{Action: "clone", ID: c.ID, Changed: true, CloneOf: id}
	if out.Job, err = h.current(r.Context(), c.ID); err != nil {
		h.apiError(w, r, err)
		return
	}
	h.answerAction(w, r, http.StatusCreated, out)
}

// apiJobTypes serves GET api/job-types: the names JobType registered,
// which POST api/jobs dispatches.
func (h *handler) apiJobTypes(w http.ResponseWriter, r *http.Request) {
	names := h.cfg.typeNames
	if names == nil {
		names = []string{}
	}
	writeJSON(w, struct {
		Types []string `json:"types"`
	}{names})
}

// apiForget serves POST api/jobs/{id}/forget: a failed job deleted. A job
// in another state answers 409 with the job; an unknown id (or one
// forgotten before) 404.
func (h *handler) apiForget(w http.ResponseWriter, r *http.Request) {
	out := apiAction{Action: "forget", ID: r.PathValue("id")}
	err := h.src.ForgetJob(r.Context(), out.ID)
	switch {
	case isNotFound(err):
		never := func(driver.JobState) bool { return false }
		h.notApplied(w, r, out, never, "only failed jobs can be forgotten", err)
		return
	case err != nil:
		h.apiError(w, r, err)
		return
	}
	out.Changed = true
	h.answerAction(w, r, http.StatusOK, out)
}

// apiCancel serves POST api/jobs/{id}/cancel: a job that has not finished
// cancelled. A job cancelled before answers 200 with "changed": false; a
// job that finished otherwise 409.
func (h *handler) apiCancel(w http.ResponseWriter, r *http.Request) {
	out := apiAction{Action: "cancel", ID: r.PathValue("id")}
	was, err := h.src.CancelJob(r.Context(), out.ID)
	switch {
	case errors.Is(err, queue.ErrFinished):
		isCancelled := func(s driver.JobState) bool { return s == queue.StateCancelled }
		h.notApplied(w, r, out, isCancelled, "it finished before it could be cancelled", queue.ErrNotFound)
		return
	case err != nil:
		h.apiError(w, r, err)
		return
	}
	out.Changed, out.Was = true, was
	if out.Job, err = h.current(r.Context(), out.ID); err != nil {
		h.apiError(w, r, err)
		return
	}
	h.answerAction(w, r, http.StatusOK, out)
}

// readBody decodes the request's JSON body into v; an empty body leaves v
// as it is. It answers a bad body with 400 and reports false.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		h.apiStatus(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return true
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		h.apiStatus(w, http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		h.apiStatus(w, http.StatusBadRequest, "the body is not the JSON this endpoint takes: "+err.Error())
		return false
	}
	if dec.More() {
		h.apiStatus(w, http.StatusBadRequest, "the body holds more than one JSON value")
		return false
	}
	return true
}

// apiFlush serves POST api/failed/flush with an optional body {"queue":
// name}: every failed job of the queue ("" or none: of every queue)
// deleted. It answers {"queue": name, "flushed": n}, n null when the
// Source cannot count.
func (h *handler) apiFlush(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Queue string `json:"queue"`
	}
	if !h.readBody(w, r, &in) {
		return
	}
	if in.Queue != "" && !h.src.Abilities().Browse {
		h.apiStatus(w, http.StatusNotFound, "flushing one queue is not available with this queue driver or inspector: flush every queue")
		return
	}
	n, err := h.src.Flush(r.Context(), clip(in.Queue))
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	out := struct {
		Queue   string `json:"queue"`
		Flushed *int   `json:"flushed"`
	}{Queue: in.Queue}
	if n >= 0 {
		out.Flushed = &n
	}
	note(r, slog.String("queue", in.Queue), slog.Int("flushed", n))
	writeJSON(w, out)
}

// apiPause serves POST api/queues/{name}/pause and /resume: {"queue":
// name, "paused": bool}, the same answer however often it is repeated.
func (h *handler) apiPause(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	paused := strings.HasSuffix(r.URL.Path, "/pause")
	if err := h.src.SetPaused(r.Context(), name, paused); err != nil {
		h.apiError(w, r, err)
		return
	}
	note(r, slog.String("queue", name), slog.Bool("paused", paused))
	writeJSON(w, struct {
		Queue  string `json:"queue"`
		Paused bool   `json:"paused"`
	}{name, paused})
}

// apiBulkRequest is the body of POST api/jobs/bulk: an action on the
// listed jobs, or on every job a filter selects (the pages' "all
// matching").
type apiBulkRequest struct {
	Action string    `json:"action"` // retry, forget or cancel
	IDs    []string  `json:"ids"`
	Match  *apiMatch `json:"match"`
	// DryRun counts what Match selects and changes nothing: the pages'
	// confirmation.
	DryRun bool `json:"dry_run"`
}

// apiMatch is a job list's filter, as api/jobs takes it.
type apiMatch struct {
	State driver.JobState `json:"state"`
	Queue string          `json:"queue"`
	Name  string          `json:"name"`
	Tag   string          `json:"tag"`
	Q     string          `json:"q"`
}

// apiBulkResult is the answer of POST api/jobs/bulk.
type apiBulkResult struct {
	Action string `json:"action"`
	// Changed is how many jobs the action changed; jobs that had moved on
	// or gone are skipped, not errors.
	Changed int `json:"changed"`
	// More is set when jobs the filter selects (or listed ids past Limit)
	// remain: call again.
	More bool `json:"more"`
	// Limit is how many jobs one call acts on.
	Limit int `json:"limit"`
	// Matching is what a dry run counted (exact up to Limit, then
	// "more"), absent when the Source cannot count.
	Matching *driver.Count `json:"matching,omitempty"`
	DryRun   bool          `json:"dry_run,omitempty"`
}

// apiBulk serves POST api/jobs/bulk.
func (h *handler) apiBulk(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var in apiBulkRequest
	if !h.readBody(w, r, &in) {
		return
	}
	a := driver.BulkAction(in.Action)
	switch {
	case a != driver.BulkRetry && a != driver.BulkForget && a != driver.BulkCancel:
		h.apiStatus(w, http.StatusBadRequest, `action must be "retry", "forget" or "cancel"`)
		return
	case (len(in.IDs) > 0) == (in.Match != nil):
		h.apiStatus(w, http.StatusBadRequest, `give either "ids" or "match"`)
		return
	case in.DryRun && in.Match == nil:
		h.apiStatus(w, http.StatusBadRequest, `"dry_run" counts what "match" selects: give "match"`)
		return
	case a == driver.BulkCancel && !h.src.Abilities().Cancel:
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	note(r, slog.String("bulk", string(a)))
	if in.Match == nil {
		out := apiBulkResult{Action: string(a), Limit: maxBulk}
		ids := in.IDs
		if len(ids) > maxBulk {
			ids, out.More = ids[:maxBulk], true
		}
		var err error
		out.Changed, err = h.actEach(ctx, a, ids)
		note(r, slog.Int("changed", out.Changed))
		if err != nil {
			h.apiError(w, r, fmt.Errorf("dashboard: bulk %s after %d jobs: %w", a, out.Changed, err))
			return
		}
		writeJSON(w, out)
		return
	}
	m := *in.Match
	if m.State == "" || m.State == "failed" {
		m.State = queue.StateDead
	}
	if !a.Valid(m.State) {
		h.apiStatus(w, http.StatusBadRequest, "only failed (dead) jobs can be retried or forgotten in bulk, and only ready, scheduled and running jobs cancelled")
		return
	}
	if !h.src.Abilities().Browse {
		h.apiStatus(w, http.StatusNotFound, "acting on every matching job needs a queue driver")
		return
	}
	q := ListQuery{State: m.State, Queue: clip(m.Queue), Name: clip(m.Name), Tag: clip(m.Tag), Search: clip(m.Q), Limit: maxBulk}
	b, bulk := h.src.(BulkSource)
	if in.DryRun {
		out := apiBulkResult{Action: string(a), Limit: maxBulk, DryRun: true}
		if bulk {
			n, err := b.CountMatching(ctx, q, bulkLimit)
			switch {
			case isUnsupported(err):
			case err != nil:
				h.apiError(w, r, err)
				return
			default:
				out.Matching, out.Limit = &n, bulkLimit
			}
		}
		writeJSON(w, out)
		return
	}
	if n, more, ok, err := h.actOnMatching(ctx, q, a); ok {
		note(r, slog.Int("changed", n))
		if err != nil {
			h.apiError(w, r, fmt.Errorf("dashboard: bulk %s after %d jobs: %w", a, n, err))
			return
		}
		writeJSON(w, apiBulkResult{Action: string(a), Changed: n, More: more, Limit: bulkLimit})
		return
	}
	res, err := h.listJobs(ctx, q)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	ids := make([]string, len(res.Jobs))
	for i, j := range res.Jobs {
		ids[i] = j.ID
	}
	out := apiBulkResult{Action: string(a), Limit: maxBulk, More: res.Next != ""}
	out.Changed, err = h.actEach(ctx, a, ids)
	note(r, slog.Int("changed", out.Changed))
	if err != nil {
		h.apiError(w, r, fmt.Errorf("dashboard: bulk %s after %d jobs: %w", a, out.Changed, err))
		return
	}
	writeJSON(w, out)
}

// actEach applies a to each job of ids, one call each, and counts the
// jobs it changed; jobs gone or in another state are skipped.
func (h *handler) actEach(ctx context.Context, a driver.BulkAction, ids []string) (int, error) {
	n := 0
	for _, id := range ids {
		var err error
		_, amends := h.amender()
		switch {
		case a == driver.BulkRetry && amends:
			// Recorded in the job's history, as the store's bulk retry
			// does; a job that is not finished is skipped.
			_, err = h.amendJob(ctx, id, driver.AmendRetry, nil)
		case a == driver.BulkRetry:
			err = h.src.RetryJob(ctx, id)
		case a == driver.BulkForget:
			err = h.src.ForgetJob(ctx, id)
		default:
			_, err = h.src.CancelJob(ctx, id)
		}
		switch {
		case err == nil:
			n++
		case isNotFound(err), errors.Is(err, queue.ErrFinished), errors.Is(err, driver.ErrJobState), errors.Is(err, queue.ErrDuplicate):
		default:
			return n, err
		}
	}
	return n, nil
}

// jobsParams are the query parameters GET api/jobs reads.
var jobsParams = []string{"state", "queue", "name", "tag", "q", "after", "page", "back", "limit"}

// unknownParam says which parameter of v is not one of known, "" when
// every one is: a misspelt filter (search= for q=) must not be ignored,
// which would answer with every job.
func unknownParam(v url.Values, known []string) string {
	for _, k := range slices.Sorted(maps.Keys(v)) {
		if !slices.Contains(known, k) {
			return "unknown query parameter " + strconv.Quote(k) + ": use " + strings.Join(known, ", ") + " (q is the payload search)"
		}
	}
	return ""
}
