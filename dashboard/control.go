package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Cancelling jobs and the periodic jobs page.

// cancellable reports whether jobs in state s can still be cancelled: they
// have not finished.
func cancellable(s driver.JobState) bool {
	switch s {
	case queue.StateReady, queue.StateScheduled, queue.StateRunning:
		return true
	}
	return false
}

// cancelOne cancels one job and goes back to the page the form was on (the
// job's page, or the list it was in).
func (h *handler) cancelOne(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	_, err := h.src.CancelJob(r.Context(), id)
	switch {
	case isNotFound(err):
		back(w, r, "jobs", "nojob", -1, false)
	case errors.Is(err, queue.ErrFinished):
		back(w, r, "jobs", "finished", -1, false)
	case err != nil:
		h.failErr(w, r, "Cancelling the job", err)
	default:
		back(w, r, "jobs", "cancelled", 1, false)
	}
}

// cancelBulk cancels the selected jobs ("cancel-selected") or the first
// maxBulk jobs that match the list's filter ("cancel-matching"). Jobs that
// finished or went away meanwhile are skipped, not errors.
func (h *handler) cancelBulk(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := driver.JobState(r.PostFormValue("state"))
	if !cancellable(st) {
		h.fail(w, r, http.StatusBadRequest, "Only ready, scheduled and running jobs can be cancelled.", nil)
		return
	}
	fallback := "jobs?" + url.Values{"state": {string(st)}}.Encode()
	ids := r.PostForm["id"]
	more := false
	switch r.PostFormValue("do") {
	case "cancel-selected":
	case "cancel-matching":
		if !h.src.Abilities().Browse {
			h.fail(w, r, http.StatusNotFound, "Acting on every matching job needs a queue driver.", nil)
			return
		}
		q := ListQuery{
			State: st, Queue: clip(r.PostFormValue("queue")), Name: clip(r.PostFormValue("name")),
			Tag: clip(r.PostFormValue("tag")), Search: clip(r.PostFormValue("q")), Limit: maxBulk,
		}
		if n, more, ok, err := h.actOnMatching(ctx, q, driver.BulkCancel); ok {
			if err != nil {
				h.failErr(w, r, "The bulk cancel (after "+strconv.Itoa(n)+" jobs)", err)
				return
			}
			flash := "cancelled"
			if more {
				flash = "more"
			}
			back(w, r, fallback, flash, n, true)
			return
		}
		res, err := h.listJobs(ctx, q)
		if err != nil {
			h.failErr(w, r, "Listing the matching jobs", err)
			return
		}
		ids = ids[:0]
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
		more = res.Next != ""
	default:
		h.fail(w, r, http.StatusBadRequest, "Unknown bulk action.", nil)
		return
	}
	if len(ids) == 0 {
		back(w, r, fallback, "none", -1, false)
		return
	}
	if len(ids) > maxBulk {
		ids, more = ids[:maxBulk], true
	}
	n := 0
	for _, id := range ids {
		_, err := h.src.CancelJob(ctx, id)
		switch {
		case err == nil:
			n++
		case isNotFound(err), errors.Is(err, queue.ErrFinished):
		default:
			h.failErr(w, r, "The bulk cancel (after "+strconv.Itoa(n)+" jobs)", err)
			return
		}
	}
	flash := "cancelled"
	if more {
		flash = "more"
	}
	back(w, r, fallback, flash, n, r.PostFormValue("do") == "cancel-matching")
}

// periodicRow is one periodic job on the periodic page.
type periodicRow struct {
	driver.PeriodicInfo
	JobURL   string          // the last tick's job page, "" without one
	JobState driver.JobState // the last tick's job state, "" when unknown or gone
	Overdue  string          // why the next tick is long past, "" when it is not
	// The actions' addresses, "" when the dashboard offers no controls.
	PauseURL, ResumeURL, RunURL string
	// CanRun: the record has the job a tick enqueues, so it can run now.
	CanRun bool
}

type periodicData struct {
	Rows []periodicRow
	// Controls: the buttons are offered (a PeriodicSource that may act).
	Controls bool
}

// maxPeriodicLookups bounds the job reads the periodic page makes to show
// each last tick's state.
const maxPeriodicLookups = 200

func (h *handler) periodicPage(w http.ResponseWriter, r *http.Request) {
	ps, err := h.src.Periodics(r.Context())
	if err != nil {
		h.failErr(w, r, "Listing the periodic jobs", err)
		return
	}
	c := h.src.Abilities()
	base := relBase(r)
	now := time.Now()
	d := periodicData{Controls: h.periodicsOf() != nil && canAct(r)}
	for i, p := range ps {
		row := periodicRow{PeriodicInfo: p, Overdue: overdue(p, now), CanRun: len(p.Template) > 0}
		if d.Controls {
			row.PauseURL, row.ResumeURL, row.RunURL = periodicURL(base, p.Name, "pause"), periodicURL(base, p.Name, "resume"), periodicURL(base, p.Name, "run")
		}
		if p.LastJobID != "" && c.Detail && i < maxPeriodicLookups {
			// A last job that is gone (retention) shows no state.
			if j, err := h.src.Job(r.Context(), p.LastJobID); err == nil {
				row.JobState = j.State
				row.JobURL = base + "jobs/" + url.PathEscape(p.LastJobID)
			} else if !isNotFound(err) {
				h.failErr(w, r, "Reading a periodic job's last run", err)
				return
			}
		}
		d.Rows = append(d.Rows, row)
	}
	h.render(w, r, http.StatusOK, "periodic", h.newPage(w, r, "Periodic jobs", "periodic", d))
}

type apiPeriodics struct {
	Periodic []apiPeriodic `json:"periodic"`
}

type apiPeriodic struct {
	Name      string    `json:"name"`
	Schedule  string    `json:"schedule"`
	LastTick  time.Time `json:"last_tick,omitzero"`
	NextTick  time.Time `json:"next_tick,omitzero"`
	LastJobID string    `json:"last_job_id,omitempty"`
	Paused    bool      `json:"paused"`
	Seen      time.Time `json:"seen,omitzero"`
	Runnable  bool      `json:"runnable"`
	Overdue   string    `json:"overdue,omitempty"`
}

// apiPeriodicOf is p as api/periodic shows it.
func apiPeriodicOf(p driver.PeriodicInfo, now time.Time) apiPeriodic {
	return apiPeriodic{Name: p.Name, Schedule: p.Schedule, LastTick: utc(p.LastTick), NextTick: utc(p.NextTick), LastJobID: p.LastJobID,
		Paused: p.Paused, Seen: utc(p.Seen), Runnable: len(p.Template) > 0, Overdue: overdue(p, now)}
}

func (h *handler) apiPeriodic(w http.ResponseWriter, r *http.Request) {
	ps, err := h.src.Periodics(r.Context())
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	out := apiPeriodics{Periodic: make([]apiPeriodic, len(ps))}
	now := time.Now()
	for i, p := range ps {
		out.Periodic[i] = apiPeriodicOf(p, now)
	}
	writeJSON(w, out)
}
