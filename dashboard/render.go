package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// pageNames are the page templates; each is parsed with layout.html.
var pageNames = []string{"overview", "jobs", "job", "queue", "workers", "periodic", "metrics", "tags", "tag", "error", "confirm", "batches", "batch", "dispatch", "graphs", "graph", "sequences"}

var funcs = template.FuncMap{
	"count": display.Count,
	"num":   display.Int,
	"int":   func(n int) string { return display.Int(int64(n)) },
	"label": stateLabel,
	"dur":   fmtDuration,
	"ts":    fmtTime,
	"ago":   fmtAgo,
	"wait":  fmtWait,
	"short": shortID,
	"rate":  func(f float64) string { return display.Float(f, 1) },
	"join":  strings.Join,
	"half":  func(n int) int { return n / 2 },
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05 UTC") },
}

func parseTemplates() map[string]*template.Template {
	m := make(map[string]*template.Template)
	for _, name := range pageNames {
		files := []string{"templates/layout.html", "templates/" + name + ".html"}
		if name == "batch" || name == "batches" || name == "graph" || name == "graphs" {
			files = append(files, "templates/batchbar.html")
		}
		m[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, files...))
	}
	m["denied"] = template.Must(template.New("denied").Funcs(funcs).ParseFS(templateFS, "templates/denied.html"))
	return m
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func fmtAgo(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < 0:
		return "in " + fmtDuration(-d)
	case d == 0:
		return "just now"
	}
	return fmtDuration(d) + " ago"
}

// fmtWait is how long since t, the start of a wait: "—" when there is
// none (zero t).
func fmtWait(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return fmtDuration(max(time.Since(t), 0).Round(time.Second))
}

// shortID abbreviates a long ID for a table cell. IDs from driver.NewID
// begin with a timestamp, so jobs pushed in the same millisecond share
// their first 12 digits: the abbreviation keeps the head and the random
// tail.
func shortID(id string) string {
	if len(id) > 16 {
		return id[:8] + "…" + id[len(id)-6:]
	}
	return id
}

// page is the model every page template gets.
type page struct {
	Title   string
	App     string
	Base    string // relative path to the dashboard root
	Nav     string // the active sidebar entry
	Caps    Abilities
	CanAct  bool
	CSRF    string
	Return  string // this page relative to the root, for forms' return field
	Flash   string
	FlashOK bool
	Refresh int // live refresh interval in milliseconds; 0 for none
	Data    any
	// ReadAt is when the page's figures were read: when the request's
	// own reads ended, or, on a page that shows only the shared figures
	// (the overview), when the read that produced them ended.
	ReadAt time.Time
	// FiguresAt is when the shared figures a page shows beside its own
	// reads (the queue page's counts, a list's tab counts) were read,
	// zero when the page shows none or they are of ReadAt's second.
	FiguresAt time.Time
	// Stale: the shared figures are the last ones read because the store
	// did not answer (StatsView.Stale).
	Stale bool
}

// sharedFigures records on p when the shared figures sv it shows were
// read (see Figures, which serves them for statsTTL, and up to
// figuresMaxAge while a refresh runs): as the page's ReadAt when they are
// all it shows, else as its FiguresAt.
func (p *page) sharedFigures(sv StatsView, only bool) {
	p.Stale = p.Stale || sv.Stale
	switch {
	case sv.At.IsZero():
	case only:
		p.ReadAt = sv.At
	case !sv.At.Truncate(time.Second).Equal(p.ReadAt.Truncate(time.Second)):
		p.FiguresAt = sv.At
	}
}

// newPage fills in what every page needs. It sets the CSRF cookie when the
// caller may act.
func (h *handler) newPage(w http.ResponseWriter, r *http.Request, title, nav string, data any) *page {
	p := &page{
		Title: title, App: h.cfg.title, Base: relBase(r), Nav: nav, Caps: h.src.Abilities(),
		CanAct: canAct(r), Return: returnPath(r), Data: data,
		Refresh: int(h.cfg.refresh / time.Millisecond),
		ReadAt:  time.Now(),
	}
	if p.CanAct {
		p.CSRF = csrfToken(w, r)
	}
	p.Flash, p.FlashOK = flashText(r.URL.Query())
	return p
}

// returnPath is the request's page relative to the dashboard root, without
// a flash message.
func returnPath(r *http.Request) string {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/queues/")
	q := r.URL.Query()
	q.Del("flash")
	q.Del("n")
	if len(q) > 0 {
		rest += "?" + q.Encode()
	}
	if rest == "" {
		return "./"
	}
	return rest
}

// flashes are the messages an action's redirect can ask for; a redirect
// carries only the code and a count, never text.
var flashes = map[string]struct {
	text string
	ok   bool
}{
	"retried":   {"Retried %s job(s).", true},
	"forgotten": {"Forgot %s job(s).", true},
	"flushed":   {"Flushed the failed jobs.", true},
	"flushedn":  {"Flushed %s failed job(s).", true},
	"paused":    {"Queue paused.", true},
	"resumed":   {"Queue resumed.", true},

	"periodicpaused":  {"Periodic job paused: no tick is enqueued until it is resumed.", true},
	"periodicresumed": {"Periodic job resumed: its next tick is enqueued.", true},
	"periodicran":     {"Periodic job run now: one job enqueued.", true},
	"tagmonitored":    {"Tag monitored: the jobs carrying it that workers finish from now on are recorded.", true},
	"tagunmonitored":  {"Tag no longer monitored: its records are dropped.", true},
	"gone":            {"That job is no longer a failed job: someone else may have retried or forgotten it.", false},
	"more":            {"Acted on %s job(s); more match the filter: run the action again.", true},
	"none":            {"No jobs were selected.", false},
	"cancelled":       {"Cancelled %s job(s).", true},
	"nojob":           {"That job is no longer in the store.", false},
	"finished":        {"That job had already finished: there was nothing to cancel.", false},
	"amended":         {"The job is ready to run again; its history records the change.", true},
	"rannow":          {"The job is ready to run now; its history records the change.", true},
	"dispatched":      {"Job dispatched; its history records who dispatched it.", true},
	"cloned":          {"This job is a clone; its history names the job it copies, which records the clone in its own.", true},
	"notamended":      {"The job has moved on since the page was read: nothing changed.", false},
	"released":        {"Sequence released: its next member is ready to run. The dead job stays a dead letter, outside the sequence; its history records who released it.", true},
	"notheld":         {"That sequence is no longer held: someone may have released it, or retried or forgotten its dead job.", false},
	// The fleet's commands (the Workers page).
	"terminated": {"Told to terminate: running jobs finish, then the workers exit for their supervisor to restart them (within about a second).", true},
	"wpaused":    {"Paused: the workers take no new jobs until continued (within about a second).", true},
	"continued":  {"Continued: the workers take jobs again.", true},
}

func flashText(q url.Values) (string, bool) {
	f, ok := flashes[q.Get("flash")]
	if !ok {
		return "", false
	}
	if strings.Contains(f.text, "%s") {
		n, _ := strconv.ParseInt(q.Get("n"), 10, 64)
		return fmt.Sprintf(f.text, display.Int(n)), f.ok
	}
	return f.text, f.ok
}

// render writes a page. A request with the X-Meridian-Partial header gets
// only the page's live region (the "live" template), which the refresh
// script swaps in.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	tmpls := []string{"layout"}
	if r.Header.Get("X-Meridian-Partial") != "" {
		// The live region begins with the time its figures were read.
		tmpls = []string{"readat", "live"}
	}
	b, ok := h.renderParts(name, p, tmpls...)
	if !ok {
		http.Error(w, "dashboard: rendering failed", http.StatusInternalServerError)
		return
	}
	writeHead(w, status)
	_, _ = w.Write(b)
}

// renderParts executes the templates tmpls of page name in turn with p
// and returns what they wrote; when one fails, it logs the error and
// returns false.
func (h *handler) renderParts(name string, p *page, tmpls ...string) ([]byte, bool) {
	var buf bytes.Buffer
	for _, t := range tmpls {
		if err := h.pages[name].ExecuteTemplate(&buf, t, p); err != nil {
			h.cfg.logger.Error("dashboard: rendering page", "page", name, "template", t, "err", err)
			return nil, false
		}
	}
	return buf.Bytes(), true
}

// writeHead writes the status line and the headers of an HTML page;
// ServeHTTP set the security headers before, and newPage the CSRF
// cookie.
func writeHead(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
}

// errorData is the model of the error page.
type errorData struct {
	Status  int
	Message string
}

// fail renders an error page. err, when set, is logged, not shown: the
// message is what the caller sees.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	if err != nil {
		h.cfg.logger.Error("dashboard: "+msg, "path", r.URL.Path, "err", err)
	}
	p := h.newPage(w, r, http.StatusText(status), "", errorData{status, msg})
	p.Refresh = 0
	h.render(w, r, status, "error", p)
}

// failErr picks the status for err and renders it.
func (h *handler) failErr(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case isNotFound(err):
		h.fail(w, r, http.StatusNotFound, what+": not found.", nil)
	case isUnsupported(err):
		h.fail(w, r, http.StatusNotFound, what+": not available with this queue driver or inspector.", nil)
	case errors.Is(err, queue.ErrBadCursor):
		h.fail(w, r, http.StatusBadRequest, what+": the page link is not one this dashboard made (its after= cursor is unknown). Start again from the first page.", nil)
	case errors.Is(err, errBadTag):
		h.fail(w, r, http.StatusBadRequest, what+": "+tagRule+".", nil)
	case errors.Is(err, driver.ErrBadSearch):
		h.fail(w, r, http.StatusBadRequest, what+": "+searchMessage(err)+".", nil)
	default:
		h.fail(w, r, http.StatusInternalServerError, what+" failed; the server log has the details.", err)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// apiError answers an API request with a JSON error.
func (h *handler) apiError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msg := "internal error"
	switch {
	case isNotFound(err):
		status, msg = http.StatusNotFound, "not found"
	case isUnsupported(err):
		status, msg = http.StatusNotFound, "not available with this queue driver or inspector"
	case errors.Is(err, queue.ErrBadCursor):
		status, msg = http.StatusBadRequest, "after is not a cursor a previous answer gave; start from the first page"
	case errors.Is(err, errBadWindow):
		status, msg = http.StatusBadRequest, `window must be "1h", "24h" or "7d"`
	case errors.Is(err, errBadTag):
		status, msg = http.StatusBadRequest, tagRule
	default:
		h.cfg.logger.Error("dashboard: api", "path", r.URL.Path, "err", err)
	}
	h.apiStatus(w, status, msg)
}

// apiStatus answers an API request with status and {"error": msg}.
func (h *handler) apiStatus(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
