package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	_ "github.com/meridianjobs/meridian/redisqueue"        // redis://, rediss://
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"    // mysql://
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres" // postgres://
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"   // sqlite://
)

func init() {
	commands["dashboard"] = command{
		summary: "serve the dashboard over an existing queue database",
		main: func(ctx context.Context, args []string, s stdio) error {
			return dashboardMain(ctx, args, s.errOut, nil)
		},
	}
}

// dashboardAuthEnv holds user:password for basic auth when --basic-auth is
// not given, so the password need not appear in the process list.
const dashboardAuthEnv = "MERIDIAN_DASHBOARD_AUTH"

// dashboardMain runs `meridian dashboard` until ctx is done. It logs to
// errOut and, when ready is not nil, reports the address it listens on.
func dashboardMain(ctx context.Context, args []string, errOut io.Writer, ready func(addr string)) error {
	fs, dsn := newFlags("dashboard", "[--dsn URL] [--addr 127.0.0.1:8080] [--basic-auth user:password] [--read-only] [--prefix /admin]", errOut)
	var (
		addr     = fs.String("addr", "127.0.0.1:8080", "address to listen on")
		prefix   = fs.String("prefix", "", "path prefix to serve under, e.g. /admin (the dashboard is at PREFIX/queues/)")
		auth     = fs.String("basic-auth", "", "user:password required of every request (default $"+dashboardAuthEnv+"); without it only local requests are served")
		readOnly = fs.Bool("read-only", false, "allow viewing only: no retry, forget, flush or pause")
		title    = fs.String("title", "Meridian", "name shown in the sidebar")
	)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("dashboard takes no arguments, got %q", pos)
	}
	if *auth == "" {
		*auth = os.Getenv(dashboardAuthEnv)
	}
	p := strings.TrimRight(*prefix, "/")
	if p != "" && !strings.HasPrefix(p, "/") {
		return usagef("--prefix %q must start with /", *prefix)
	}
	log := slog.New(slog.NewTextHandler(errOut, nil))

	// The dashboard shows an existing queue: it creates no tables and no
	// file (its actions change jobs, never the schema).
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()

	opts := []dashboard.Option{dashboard.Title(*title), dashboard.Logger(log)}
	var h http.Handler
	if *auth != "" {
		user, pass, ok := strings.Cut(*auth, ":")
		if !ok || user == "" || pass == "" {
			return usagef("--basic-auth must be user:password")
		}
		act := !*readOnly
		// The basic-auth wrapper has checked the caller before the
		// dashboard sees the request.
		opts = append(opts, dashboard.Authorize(func(*http.Request) (bool, bool) { return true, act }))
		h = basicAuth(user, pass, dashboard.Handler(dashboard.ForQueue(q), opts...))
	} else {
		if *readOnly {
			opts = append(opts, dashboard.Authorize(localReadOnly))
		}
		h = dashboard.Handler(dashboard.ForQueue(q), opts...)
	}

	mux := http.NewServeMux()
	mux.Handle(p+"/queues/", http.StripPrefix(p, h))
	mux.HandleFunc(p+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "queues/")
		w.WriteHeader(http.StatusFound)
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	url := "http://" + ln.Addr().String() + p + "/queues/"
	log.Info("meridian dashboard listening", "url", url, "basic_auth", *auth != "", "read_only", *readOnly)
	if *auth == "" {
		if host, _, _ := net.SplitHostPort(ln.Addr().String()); !isLoopbackHost(host) {
			log.Warn("no --basic-auth: only requests from this machine will be served")
		}
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving the dashboard: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("stopping the dashboard: %w", err)
	}
	return nil
}

// basicAuth requires user and pass of every request, answering 401 with a
// challenge so browsers prompt for them.
func basicAuth(user, pass string, next http.Handler) http.Handler {
	wantU, wantP := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotU, gotP := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if !ok || subtle.ConstantTimeCompare(gotU[:], wantU[:])&subtle.ConstantTimeCompare(gotP[:], wantP[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="meridian dashboard", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// localReadOnly is the default local-only rule without the right to act.
func localReadOnly(r *http.Request) (read, act bool) { return dashboard.IsLocal(r), false }

func isLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
