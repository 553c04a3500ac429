package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// amendRoutes adds the pages' job actions and the Dispatch page to m.
func (h *handler) amendRoutes(m *router) {
	m.HandleFunc("POST /queues/jobs/{id}/retry", h.retryPage)
	m.HandleFunc("POST /queues/jobs/{id}/run-now", h.runNowPage)
	m.HandleFunc("POST /queues/jobs/{id}/clone", h.clonePage)
	m.HandleFunc("GET /queues/dispatch", h.dispatchPage)
	m.HandleFunc("POST /queues/dispatch", h.dispatchPost)
}

// amendLinks fills the job page's job actions for j: run now for a
// scheduled job, run again for a kept cancelled or done one, and the
// payload edit for a finished job whose type JobType registered.
func (h *handler) amendLinks(r *http.Request, d *jobData) {
	if _, ok := h.amender(); !ok || !canAct(r) {
		return
	}
	j, base := d.Job, relBase(r)+"jobs/"+url.PathEscape(d.Job.ID)
	d.CloneURL = base + "/clone"
	switch j.State {
	case queue.StateScheduled:
		d.RunNowURL = base + "/run-now"
	case queue.StateDead:
		d.AmendURL = base + "/retry"
	case queue.StateDone, queue.StateCancelled:
		if j.Meta[driver.MetaBatch] == "" {
			d.AmendURL = base + "/retry"
		}
	}
	if d.AmendURL == "" {
		return
	}
	if _, ok := h.cfg.types[j.Name]; ok && utf8.Valid(j.Payload) {
		d.Editable, d.EditPayload = true, string(j.Payload)
	}
}

// retryPage serves POST jobs/{id}/retry: the job run again, with the
// form's payload when it carries edit=1 (checked against the job's type
// first; a payload refused changes nothing and says why).
func (h *handler) retryPage(w http.ResponseWriter, r *http.Request) {
	var payload []byte
	if r.PostFormValue("edit") == "1" {
		payload = []byte(r.PostFormValue("payload"))
	}
	_, err := h.amendJob(r.Context(), r.PathValue("id"), driver.AmendRetry, payload)
	h.amended(w, r, err, "amended")
}

// runNowPage serves POST jobs/{id}/run-now: a scheduled job made ready.
func (h *handler) runNowPage(w http.ResponseWriter, r *http.Request) {
	_, err := h.amendJob(r.Context(), r.PathValue("id"), driver.AmendRunNow, nil)
	h.amended(w, r, err, "rannow")
}

// clonePage serves POST jobs/{id}/clone: a copy of the job pushed under
// a new ID, then the clone's page.
func (h *handler) clonePage(w http.ResponseWriter, r *http.Request) {
	_, c, err := h.cloneJob(r.Context(), r.PathValue("id"))
	if err == nil {
		seeOther(w, relBase(r)+"jobs/"+url.PathEscape(c.ID)+"?flash=cloned")
		return
	}
	if errors.Is(err, queue.ErrDuplicate) {
		h.fail(w, r, http.StatusConflict, "Not cloned: its unique key is held by an active job ("+err.Error()+"). Nothing changed.", nil)
		return
	}
	h.amended(w, r, err, "")
}

// amended answers a page's job action: back to the page with flash, or
// a page that says why nothing changed.
func (h *handler) amended(w http.ResponseWriter, r *http.Request, err error, flash string) {
	fallback := "jobs/" + url.PathEscape(r.PathValue("id"))
	switch {
	case err == nil:
		back(w, r, fallback, flash, -1, false)
	case errors.Is(err, errPayload), errors.Is(err, driver.ErrInvalid):
		h.fail(w, r, http.StatusUnprocessableEntity, "The payload was not stored: "+err.Error()+". Nothing changed: go back to correct it.", nil)
	case errors.Is(err, driver.ErrJobState):
		back(w, r, fallback, "notamended", -1, false)
	case isNotFound(err):
		back(w, r, fallback, "nojob", -1, false)
	case errors.Is(err, queue.ErrDuplicate):
		h.fail(w, r, http.StatusConflict, "Not retried: its unique key is held by another active job ("+err.Error()+"). Nothing changed.", nil)
	default:
		h.failErr(w, r, "The action", err)
	}
}

// dispatchData is the model of the Dispatch page.
type dispatchData struct {
	Types []string // the registered job types (JobType)
	// Name, Queue and Payload refill the form after a refused dispatch.
	Name, Queue, Payload string
	Error                string
}

// dispatchPage serves GET dispatch: the form that dispatches a job of a
// registered type.
func (h *handler) dispatchPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.amender(); !ok {
		h.fail(w, r, http.StatusNotFound, "Dispatching jobs is not available with this queue driver or inspector.", nil)
		return
	}
	h.renderDispatch(w, r, http.StatusOK, dispatchData{Types: h.cfg.typeNames, Payload: "{}"})
}

func (h *handler) renderDispatch(w http.ResponseWriter, r *http.Request, status int, d dispatchData) {
	p := h.newPage(w, r, "Dispatch a job", "dispatch", d)
	p.Refresh = 0
	h.render(w, r, status, "dispatch", p)
}

// dispatchPost serves POST dispatch: the job pushed, then its page; a
// payload its type refuses shows the form again with the reason.
func (h *handler) dispatchPost(w http.ResponseWriter, r *http.Request) {
	d := dispatchData{Types: h.cfg.typeNames, Name: r.PostFormValue("name"),
		Queue: clip(r.PostFormValue("queue")), Payload: r.PostFormValue("payload")}
	j, err := h.dispatchJob(r.Context(), d.Name, d.Queue, []byte(d.Payload))
	switch {
	case err == nil:
		seeOther(w, relBase(r)+"jobs/"+url.PathEscape(j.ID)+"?flash=dispatched")
	case errors.Is(err, errPayload), errors.Is(err, driver.ErrInvalid):
		d.Error = "Not dispatched: " + err.Error() + "."
		h.renderDispatch(w, r, http.StatusUnprocessableEntity, d)
	case errors.Is(err, queue.ErrDuplicate):
		d.Error = "Not dispatched: " + err.Error() + "."
		h.renderDispatch(w, r, http.StatusConflict, d)
	default:
		h.failErr(w, r, "Dispatching the job", err)
	}
}
