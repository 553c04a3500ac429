package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
)

// proxyHeaders are the headers that show a request came through a proxy
// or a CDN: its RemoteAddr is then the proxy's, not the caller's. A header
// present with an empty value counts.
var proxyHeaders = []string{
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip",
	"X-Client-Ip", "True-Client-Ip", "Cf-Connecting-Ip",
}

// IsLocal reports whether r came straight from a loopback address,
// carrying none of the headers a proxy or CDN adds (Forwarded,
// X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto, X-Real-IP,
// X-Client-IP, True-Client-IP, CF-Connecting-IP). It is the rule Handler
// applies when no Authorize option is given, for an Authorize function
// that builds on it.
//
// A forwarder on the same host that adds none of those headers (socat, an
// nginx proxy_pass without proxy_set_header) makes every request it
// forwards look local: configure Authorize on any dashboard reachable
// through one, or make the forwarder set X-Forwarded-For.
func IsLocal(r *http.Request) bool {
	_, ok := localWhy(r)
	return ok
}

// localWhy is IsLocal with the reason a request is not local.
func localWhy(r *http.Request) (why string, ok bool) {
	for _, name := range proxyHeaders {
		if len(r.Header.Values(name)) > 0 {
			return "The request carries a " + name + " header: it came through a proxy, so where it came from cannot be trusted.", false
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	host, _, _ = strings.Cut(host, "%")
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return "", true
	}
	return "The request came from " + host + ".", false
}

// access decides what the caller may do. Without an Authorize option only
// local requests (IsLocal) are served; why says what refused the request.
func (h *handler) access(r *http.Request) (read, act bool, why string) {
	if h.cfg.authorize != nil {
		read, act = h.cfg.authorize(r)
		return read, read && act, "The application's Authorize check refused this request."
	}
	why, ok := localWhy(r)
	if !ok {
		return false, false, why + " " + localOnly
	}
	return true, true, ""
}

// localOnly is the refusal's rule, said the same way on the page and in
// the API.
const localOnly = "The dashboard answers only local requests unless you configure Authorize."

func (h *handler) deny(w http.ResponseWriter, r *http.Request, why string) {
	if strings.HasPrefix(r.URL.Path, "/queues/api/") {
		h.apiStatus(w, http.StatusForbidden, why)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	data := struct {
		Base, Why, Title string
		Authorized       bool
	}{relBase(r), why, h.cfg.title, h.cfg.authorize != nil}
	if err := h.pages["denied"].ExecuteTemplate(w, "denied", data); err != nil {
		h.cfg.logger.Error("dashboard: rendering refusal", "err", err)
	}
}

// The double-submit token: a random value in a cookie scoped to the
// dashboard's path, echoed by every form. A cross-site page can make the
// browser send the cookie but cannot read it to fill in the form.
const (
	csrfCookie = "meridian_csrf"
	csrfField  = "csrf_token"
	csrfHeader = "X-Csrf-Token"
)

// csrfToken returns the request's token, setting a new cookie when it has
// none. The cookie's Path is the mount point's /queues/ directory.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validTokenShape(c.Value) {
		return c.Value
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	t := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: t, Path: mountRoot(r),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	return t
}

func validTokenShape(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// validCSRF reports whether the request's form field (or header) matches
// its cookie.
func validCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validTokenShape(c.Value) {
		return false
	}
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue(csrfField)
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) == 1
}
