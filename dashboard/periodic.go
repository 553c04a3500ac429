package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The periodic jobs' controls: pause, resume and run now.

// PeriodicSource is a Source that can also pause, resume and run periodic
// jobs: the Periodic page's buttons and POST api/periodic/{name}/pause,
// /resume and /run. The handler offers them when the Source is a
// PeriodicSource and its Abilities().Periodic is set. ForQueue's Source is
// one; it works when its driver has driver.Scheduler.
type PeriodicSource interface {
	// PausePeriodic pauses or resumes the periodic job name in the store
	// (driver.Scheduler.PausePeriodic), or fails with an error wrapping
	// ErrNotFound.
	PausePeriodic(ctx context.Context, name string, paused bool) error
	// RunPeriodic pushes one run of the periodic job name now, outside
	// its schedule (driver.RunPeriodic), and returns its job.
	RunPeriodic(ctx context.Context, name string) (driver.Job, error)
}

// PausePeriodic pauses or resumes a periodic job (see PeriodicSource).
func (qi *QueueInspector) PausePeriodic(ctx context.Context, name string, paused bool) error {
	if qi.sched == nil {
		return fmt.Errorf("dashboard: pausing periodic job %s: %w", name, queue.ErrUnsupported)
	}
	return qi.sched.PausePeriodic(ctx, name, paused)
}

// RunPeriodic runs a periodic job now (see PeriodicSource).
func (qi *QueueInspector) RunPeriodic(ctx context.Context, name string) (driver.Job, error) {
	j, err := driver.RunPeriodic(ctx, qi.q, name)
	if err == nil {
		qi.figures.reset()
	}
	return j, err
}

// periodicsOf returns the handler's PeriodicSource, or nil when it offers
// no periodic controls.
func (h *handler) periodicsOf() PeriodicSource {
	ps, ok := h.src.(PeriodicSource)
	if !ok || !h.src.Abilities().Periodic {
		return nil
	}
	return ps
}

// overdueAfter is how far past its next tick a schedule must be before the
// Periodic page calls it overdue: a tick is claimed a moment after it falls.
const overdueAfter = time.Minute

// overdue explains a schedule whose next tick is long past, "" otherwise.
func overdue(p driver.PeriodicInfo, now time.Time) string {
	if p.Paused || p.NextTick.IsZero() || now.Sub(p.NextTick) < overdueAfter {
		return ""
	}
	if p.Seen.IsZero() || p.Seen.Before(p.NextTick) {
		since := "no worker has registered it or enqueued a tick since " + p.Seen.UTC().Format(time.RFC3339)
		if p.Seen.IsZero() {
			since = "no worker of this release has registered it"
		}
		return "Overdue: " + since + ". No running worker has it; start one that registers it."
	}
	return "Overdue: a worker registered it since its next tick fell, but has not enqueued that tick yet."
}

// periodicAction serves POST periodic/{name}/pause, /resume and /run.
func (h *handler) periodicAction(w http.ResponseWriter, r *http.Request) {
	ps := h.periodicsOf()
	name := r.PathValue("name")
	if ps == nil {
		h.failErr(w, r, "Changing the periodic job", queue.ErrUnsupported)
		return
	}
	var err error
	flash := "periodicran"
	switch verb := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]; verb {
	case "pause", "resume":
		err = ps.PausePeriodic(r.Context(), name, verb == "pause")
		flash = "periodic" + verb + "d"
	default:
		_, err = ps.RunPeriodic(r.Context(), name)
	}
	if err != nil {
		h.failErr(w, r, "Changing the periodic job", err)
		return
	}
	back(w, r, "periodic", flash, -1, false)
}

// apiPeriodicAction serves POST api/periodic/{name}/pause, /resume and
// /run: the periodic job's record after the change, and for run the job
// pushed.
func (h *handler) apiPeriodicAction(w http.ResponseWriter, r *http.Request) {
	ps := h.periodicsOf()
	if ps == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	name := r.PathValue("name")
	var out struct {
		Periodic apiPeriodic `json:"periodic"`
		JobID    string      `json:"job_id,omitempty"`
	}
	switch verb := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]; verb {
	case "pause", "resume":
		if err := ps.PausePeriodic(r.Context(), name, verb == "pause"); err != nil {
			h.apiError(w, r, err)
			return
		}
	default:
		j, err := ps.RunPeriodic(r.Context(), name)
		if err != nil {
			h.apiError(w, r, err)
			return
		}
		out.JobID = j.ID
	}
	recs, err := h.src.Periodics(r.Context())
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	for _, p := range recs {
		if p.Name == name {
			out.Periodic = apiPeriodicOf(p, time.Now())
		}
	}
	writeJSON(w, out)
}

// periodicRoutes adds the periodic controls and their API to m.
func (h *handler) periodicRoutes(m *router) {
	for _, verb := range []string{"pause", "resume", "run"} {
		m.HandleFunc("POST /queues/periodic/{name}/"+verb, h.periodicAction)
		m.HandleFunc("POST /queues/api/periodic/{name}/"+verb, h.apiPeriodicAction)
	}
}

// periodicURL is the address of an action on the periodic job name,
// relative to the dashboard root.
func periodicURL(base, name, verb string) string {
	return base + "periodic/" + url.PathEscape(name) + "/" + verb
}
