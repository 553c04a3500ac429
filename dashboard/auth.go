package dashboard

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
)

// Identity is who makes a request, as the dashboard records its actions.
type Identity struct {
	// Name is who acts, as the log shows it: "alice", "deploy-bot".
	Name string
	// Act: the caller may act (POST), not only read. It is what the
	// BearerTokens hook grants; for other requests it is what Authorize
	// (or the local-only default) decided.
	Act bool
	// Bearer is set when the request authenticated with a bearer token.
	Bearer bool
}

// BearerTokens lets scripts call the API with "Authorization: Bearer
// TOKEN". fn checks the token and returns who holds it and whether it may
// act (Identity.Act; its Bearer field is set by the handler); ok false
// refuses the request with 401 and a JSON error. fn is called
// concurrently, once per request that carries a bearer token.
//
// A request with a bearer token is decided by fn alone: Authorize, the
// local-only default and Identify are not consulted. It skips the
// cross-origin check and the double-submit token, which protect cookie
// sessions from cross-site forms: a browser never adds an Authorization
// header to another site's request by itself. Without BearerTokens every
// request that carries a bearer token is refused with 401.
func BearerTokens(fn func(ctx context.Context, token string) (id Identity, ok bool)) Option {
	return func(c *config) { c.bearer = fn }
}

// Identify names the caller of a request without a bearer token (a cookie
// session that Authorize let in), for the record of its actions: fn
// returns the user's name, or "" when it cannot tell. It is called once
// per request after Authorize allowed it, concurrently. Without it such
// callers are recorded as "local" when the local-only default let them in
// and as "" (unknown) under Authorize.
func Identify(fn func(r *http.Request) string) Option {
	return func(c *config) { c.identify = fn }
}

// IdentityOf returns who makes the request whose context is ctx: the
// handler puts it in the context of every request it lets through, so a
// Source's action methods (RetryJob, CancelJob, ...) can record who acted.
// ok is false for a context that did not come from the handler.
func IdentityOf(ctx context.Context) (id Identity, ok bool) {
	a, ok := ctx.Value(actorKey{}).(*actor)
	if !ok {
		return Identity{}, false
	}
	return a.Identity, true
}

type actorKey struct{}

// actor is the request's caller and what its action did, for the line
// the handler logs after an action.
type actor struct {
	Identity
	attrs []slog.Attr
}

// note adds attributes to the log line of the request's action.
func note(r *http.Request, attrs ...slog.Attr) {
	if a, ok := r.Context().Value(actorKey{}).(*actor); ok {
		a.attrs = append(a.attrs, attrs...)
	}
}

// bearerToken returns the request's bearer token; has is set when it
// carries an Authorization header of the Bearer scheme at all.
func bearerToken(r *http.Request) (token string, has bool) {
	scheme, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// identify decides who makes r and what it may do. When it refuses, it
// has answered the request and returns ok false.
func (h *handler) identify(w http.ResponseWriter, r *http.Request) (id Identity, ok bool) {
	if tok, has := bearerToken(r); has {
		switch {
		case h.cfg.bearer == nil:
			h.unauthorized(w, r, "bearer tokens are not accepted: the application configured no BearerTokens check")
			return Identity{}, false
		case tok == "":
			h.unauthorized(w, r, "empty bearer token")
			return Identity{}, false
		}
		id, ok := h.cfg.bearer(r.Context(), tok)
		if !ok {
			h.unauthorized(w, r, "bearer token refused")
			return Identity{}, false
		}
		id.Bearer = true
		return id, true
	}
	read, act, why := h.access(r)
	if !read {
		h.deny(w, r, why)
		return Identity{}, false
	}
	id = Identity{Act: act}
	switch {
	case h.cfg.identify != nil:
		id.Name = h.cfg.identify(r)
	case h.cfg.authorize == nil:
		id.Name = "local"
	}
	return id, true
}

// unauthorized answers a refused bearer token: 401 with a JSON error under
// api/, the error page elsewhere.
func (h *handler) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="meridian"`)
	if isAPI(r) {
		h.apiStatus(w, http.StatusUnauthorized, msg)
		return
	}
	h.fail(w, r, http.StatusUnauthorized, "Refused: "+msg+".", nil)
}

// isAPI reports whether r is for the JSON API.
func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/queues/api/") }

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logAction records an action request: who, what, how it ended, and what
// the handler noted. It is the record a job's history will take over.
func (h *handler) logAction(r *http.Request, a *actor, status int) {
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.String("by", a.Name), slog.Bool("bearer", a.Bearer),
	}
	h.cfg.logger.LogAttrs(r.Context(), slog.LevelInfo, "dashboard: action", append(attrs, a.attrs...)...)
}

// refuse answers a request the checks before the routes refused: a JSON
// error under api/, the error page elsewhere.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if isAPI(r) {
		h.apiStatus(w, status, msg)
		return
	}
	h.fail(w, r, status, msg, nil)
}

// wrongMethod answers, with a JSON 405 and an Allow header, a request for
// a known path asked with a method none of its routes takes. It reports
// whether it answered.
func (h *handler) wrongMethod(w http.ResponseWriter, r *http.Request) bool {
	if _, pattern := h.mux.Handler(r); pattern != "" {
		return false
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	h.apiStatus(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed here: use "+strings.Join(allow, " or "))
	return true
}
