package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
)

// proxyHeaders are the headers that show a request came through a proxy:
// its RemoteAddr is then the proxy's, not the caller's.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"}

// access decides what the caller may do. Without an Authorize option only
// direct loopback requests are served; why says what refused the request.
func (h *handler) access(r *http.Request) (read, act bool, why string) {
	if h.cfg.authorize != nil {
		read, act = h.cfg.authorize(r)
		return read, read && act, "The application's Authorize check refused this request."
	}
	for _, name := range proxyHeaders {
		if r.Header.Get(name) != "" {
			return false, false, "The request carries a " + name + " header: it came through a proxy, so its origin cannot be trusted without an Authorize check."
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	host, _, _ = strings.Cut(host, "%")
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true, true, ""
	}
	return false, false, "The request came from " + host + ", which is not this machine."
}

func (h *handler) deny(w http.ResponseWriter, r *http.Request, why string) {
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
