package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Option configures Handler.
type Option func(*config)

type config struct {
	authorize func(*http.Request) (read, act bool)
	logger    *slog.Logger
	refresh   time.Duration
	timeout   time.Duration
	title     string
	origins   []string
	warnings  func(context.Context) map[string][]string
	bearer    func(ctx context.Context, token string) (Identity, bool)
	identify  func(r *http.Request) string
	types     map[string]jobType // JobType's, by job name
	typeNames []string           // their names, in registration order
	// searchBudget is how long a payload search goes on by itself
	// (SearchBudget).
	searchBudget time.Duration
}

// Authorize sets the access check: fn reports, per request, whether the
// caller may read the dashboard and whether it may act (retry, forget,
// flush, pause, resume). A caller that may not read gets 403 on every page;
// one that may read but not act sees no action buttons and gets 403 on
// every POST. fn is called concurrently.
//
// Without Authorize, Handler serves only local requests (IsLocal): from a
// loopback address, carrying no proxy or CDN header. That is a development
// setting; see IsLocal for the same-host forwarder it cannot tell apart.
// Refused pages get a 403 page that says how to configure access, refused
// api/ requests a JSON 403.
func Authorize(fn func(r *http.Request) (read, act bool)) Option {
	return func(c *config) { c.authorize = fn }
}

// Warnings sets a source of warnings per queue (for example the alerts
// firing in observe/alert: long waits, failure rates). fn returns, per
// queue name, the lines to show; the overview marks those queues' rows and
// shows the lines under their names, and api/stats carries them as
// "warnings". fn is called once per overview or stats request,
// concurrently, and should answer from memory: an alerter's last check,
// not a fresh query.
func Warnings(fn func(ctx context.Context) map[string][]string) Option {
	return func(c *config) { c.warnings = fn }
}

// Logger sets where the handler logs failed reads and actions; the default
// is slog.Default().
func Logger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// RefreshInterval sets how often pages refresh their live regions; zero or
// less turns live refresh off. The default is 5 seconds.
func RefreshInterval(d time.Duration) Option { return func(c *config) { c.refresh = d } }

// RequestTimeout bounds the reads and actions of one request; the default
// is 10 seconds.
func RequestTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Title sets the name shown in the sidebar; the default is "Meridian".
func Title(s string) Option { return func(c *config) { c.title = s } }

// TrustedOrigin lets POSTs from origin (for example
// "https://admin.example.com") through the cross-origin check, for a
// dashboard whose pages are served from another origin than its API. The
// double-submit token is still required.
func TrustedOrigin(origin string) Option {
	return func(c *config) { c.origins = append(c.origins, origin) }
}

// Handler returns the dashboard as an http.Handler. Its routes are
// absolute under the mount point and begin with /queues/, so mount it with
// the prefix stripped:
//
//	http.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(src)))
//
// src is where every page gets its data: ForQueue's over a driver (every
// page), NewInspector's over the in-process counters (the overview, its
// chart and the failed jobs), InspectorSource's over another Inspector, or
// any Source of the caller's; its Abilities decide which pages and actions
// are offered. The handler is safe for concurrent use and starts no
// goroutine that outlives a request. It panics if src is nil or an Option
// is invalid (a TrustedOrigin that is not an origin).
func Handler(src Source, opts ...Option) http.Handler {
	cfg := config{refresh: 5 * time.Second, timeout: 10 * time.Second, title: "Meridian", searchBudget: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	h := &handler{cfg: cfg, cop: http.NewCrossOriginProtection()}
	for _, o := range cfg.origins {
		if err := h.cop.AddTrustedOrigin(o); err != nil {
			panic("dashboard: TrustedOrigin: " + err.Error())
		}
	}
	if src == nil {
		panic("dashboard: Handler given a nil Source")
	}
	h.src = src
	h.pages = parseTemplates()
	h.routes()
	return h
}

type handler struct {
	cfg   config
	src   Source
	cop   *http.CrossOriginProtection
	mux   *router
	pages map[string]*template.Template
}

// router is the handler's ServeMux, keeping the patterns it was given so
// that a test can hold the API's routes against the OpenAPI document.
type router struct {
	*http.ServeMux
	patterns []string
}

// HandleFunc registers fn for pattern and remembers the pattern.
func (m *router) HandleFunc(pattern string, fn func(http.ResponseWriter, *http.Request)) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.HandleFunc(pattern, fn)
}

func (h *handler) routes() {
	m := &router{ServeMux: http.NewServeMux()}
	m.HandleFunc("GET /queues/{$}", h.overview)
	m.HandleFunc("GET /queues/failed", h.failed)
	m.HandleFunc("POST /queues/failed/{id}/retry", h.retryOne)
	m.HandleFunc("POST /queues/failed/{id}/forget", h.forgetOne)
	m.HandleFunc("POST /queues/failed/flush", h.flush)
	m.HandleFunc("POST /queues/failed/bulk", h.bulk)
	m.HandleFunc("GET /queues/jobs", h.jobs)
	m.HandleFunc("GET /queues/jobs/{id}", h.job)
	m.HandleFunc("POST /queues/jobs/{id}/cancel", h.cancelOne)
	m.HandleFunc("POST /queues/jobs/bulk", h.cancelBulk)
	m.HandleFunc("GET /queues/confirm", h.confirm)
	m.HandleFunc("GET /queues/periodic", h.periodicPage)
	m.HandleFunc("GET /queues/metrics", h.metricsPage)
	m.HandleFunc("GET /queues/api/periodic", h.apiPeriodic)
	m.HandleFunc("GET /queues/queue/{name}", h.queue)
	m.HandleFunc("POST /queues/queue/{name}/pause", h.pause)
	m.HandleFunc("POST /queues/queue/{name}/resume", h.pause)
	m.HandleFunc("GET /queues/workers", h.workers)
	m.HandleFunc("GET /queues/api/stats", h.apiStats)
	m.HandleFunc("GET /queues/api/jobs", h.apiJobs)
	m.HandleFunc("GET /queues/api/jobs/{id}", h.apiJob)
	m.HandleFunc("GET /queues/api/metrics", h.apiMetrics)
	m.HandleFunc("GET /queues/api/workers", h.apiWorkers)
	h.batchRoutes(m)
	h.graphRoutes(m)
	h.periodicRoutes(m)
	h.fleetRoutes(m)
	h.tagRoutes(m)
	h.actRoutes(m)
	h.amendRoutes(m)
	h.sequenceRoutes(m)
	m.HandleFunc("GET /queues", func(w http.ResponseWriter, r *http.Request) {
		// Relative to /prefix/queues, "queues/" is the dashboard root.
		seeOther(w, "queues/")
	})
	h.mux = m
}

// csp allows only the embedded stylesheet and script; inline SVG charts use
// attributes and classes, never style attributes.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")

	// Static assets hold nothing private and style the refusal page.
	if strings.HasPrefix(r.URL.Path, "/queues/assets/") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.asset(w, r)
		return
	}
	hd.Set("Cache-Control", "no-store")

	id, ok := h.identify(w, r)
	if !ok {
		return
	}
	// An unknown address, or a known one asked with a method it does not
	// take, changes nothing: it is answered before the POST checks, so an
	// API client learns that the endpoint does not exist, not that its
	// form token is missing.
	if h.unknownPath(r) {
		h.notFound(w, r)
		return
	}
	if isAPI(r) && h.wrongMethod(w, r) {
		return
	}
	if !isSafe(r.Method) {
		if !id.Act {
			h.refuse(w, r, http.StatusForbidden, "You may view this dashboard but not act on it.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		// The cross-origin and double-submit checks guard cookie
		// sessions; a bearer token is no cookie a cross-site form can
		// make the browser send.
		if !id.Bearer {
			if err := h.cop.Check(r); err != nil {
				h.refuse(w, r, http.StatusForbidden, "Cross-site request refused.")
				return
			}
			if !validCSRF(r) {
				h.refuse(w, r, http.StatusForbidden, "Missing or stale form token: reload the page and try again.")
				return
			}
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.timeout)
	defer cancel()
	a := &actor{Identity: id}
	ctx = context.WithValue(ctx, actorKey{}, a)
	r = r.WithContext(context.WithValue(ctx, actKey{}, id.Act))
	if isSafe(r.Method) {
		h.mux.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	h.mux.ServeHTTP(sw, r)
	h.logAction(r, a, sw.status)
}

// unknownPath reports whether no route has r's path for any method: the
// mux would answer a plain-text 404 (a known path asked with the wrong
// method keeps the mux's 405).
func (h *handler) unknownPath(r *http.Request) bool {
	if _, pattern := h.mux.Handler(r); pattern != "" {
		return false
	}
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" {
			return false
		}
	}
	return true
}

// notFound answers an unknown address: a dashboard page that says so, or
// a JSON error under api/.
func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/queues/api/") {
		h.apiStatus(w, http.StatusNotFound, "no such endpoint")
		return
	}
	h.fail(w, r, http.StatusNotFound, "There is no page at this address. It may be a mistyped or an old link.", nil)
}

type actKey struct{}

// canAct reports whether the request's caller may act.
func canAct(r *http.Request) bool {
	act, _ := r.Context().Value(actKey{}).(bool)
	return act
}

func isSafe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

func (h *handler) asset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/queues/")
	b, err := fs.ReadFile(assetFS, name)
	if err != nil || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

// relBase returns the relative path from the request's page to the
// dashboard root (the /queues/ directory): "./" or a run of "../". Links
// and redirects built on it work under any mount prefix.
func relBase(r *http.Request) string {
	p := r.URL.EscapedPath()
	rest, ok := strings.CutPrefix(p, "/queues/")
	if !ok {
		return "./queues/"
	}
	if d := strings.Count(rest, "/"); d > 0 {
		return strings.Repeat("../", d)
	}
	return "./"
}

// mountRoot returns the absolute path of the dashboard root as the browser
// sees it (for example /admin/queues/), from the request line, which
// http.StripPrefix leaves alone. It falls back to /queues/.
func mountRoot(r *http.Request) string {
	stripped := r.URL.EscapedPath()
	orig := r.RequestURI
	if u, err := url.ParseRequestURI(orig); err == nil {
		orig = u.EscapedPath()
	} else {
		orig = ""
	}
	if prefix, ok := strings.CutSuffix(orig, stripped); ok && strings.HasPrefix(stripped, "/queues") {
		return prefix + "/queues/"
	}
	return "/queues/"
}

// seeOther answers a POST with a redirect to a path relative to the
// request's URL. http.Redirect would make it absolute from the stripped
// path, which breaks under a mount prefix.
func seeOther(w http.ResponseWriter, loc string) {
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}

// safeReturn checks a form's return path: relative to the dashboard root,
// no scheme, host or parent steps. It returns "" when it is not.
func safeReturn(s string) string {
	if s == "" || strings.ContainsAny(s, "\\\r\n") || strings.HasPrefix(s, "/") {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		// Browsers treat %2e as a dot in path segments.
		if seg, err := url.PathUnescape(seg); err != nil || seg == ".." || seg == "." {
			return ""
		}
	}
	return s
}

// isUnsupported reports an ability the source lacks.
func isUnsupported(err error) bool {
	return errors.Is(err, errNoStore) || errors.Is(err, queue.ErrUnsupported)
}
