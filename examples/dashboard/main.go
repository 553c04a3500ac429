// Command dashboard mounts Meridian's dashboard under /admin/queues/ of an
// application's own router, behind the application's login: here HTTP
// basic auth with two roles, a viewer who may read and an operator who may
// also act (retry, cancel, pause). Swap checkLogin for your session lookup.
//
//	DASHBOARD_VIEWER_PASSWORD=look DASHBOARD_OPERATOR_PASSWORD=act go run ./examples/dashboard
//	open http://localhost:8080/admin/queues/   # user "viewer" or "operator"
//
// The queue is a SQLite file (dashboard.db) by default; -queue takes any
// queue URL. A worker runs beside the dashboard on a few jobs, one of which
// always fails, so the pages have something to show.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/queue"
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// ChargeCard is the example's job; card "0000" is always declined.
type ChargeCard struct {
	Order string `json:"order"`
	Card  string `json:"card"`
}

func main() {
	url := flag.String("queue", "sqlite://dashboard.db", "queue URL")
	addr := flag.String("addr", "localhost:8080", "listen address")
	flag.Parse()
	users := map[string]user{
		"viewer":   {password: os.Getenv("DASHBOARD_VIEWER_PASSWORD")},
		"operator": {password: os.Getenv("DASHBOARD_OPERATOR_PASSWORD"), operator: true},
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "dashboard at http://%s/admin/queues/\n", ln.Addr())
	if err := run(ctx, *url, ln, users); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// user is one login of the example; a user without a password cannot
// log in.
type user struct {
	password string
	operator bool
}

// run serves the application on ln until ctx is done, with a worker on the
// queue url names.
func run(ctx context.Context, url string, ln net.Listener, users map[string]user) error {
	q, err := queue.Open(ctx, url)
	if err != nil {
		return err
	}
	defer q.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the application; its queues are at /admin/queues/")
	})
	// The dashboard's links are relative, so it works under any prefix:
	// strip the part before /queues/ and mount it there.
	dash := dashboard.Handler(dashboard.ForQueue(q), dashboard.Authorize(func(r *http.Request) (read, act bool) {
		u, ok := checkLogin(r, users)
		return ok, ok && u.operator
	}))
	mux.Handle("/admin/queues/", requireLogin(users, http.StripPrefix("/admin", dash)))

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ln) }()

	w := queue.NewWorker(q).MaxRetry(2).Backoff(time.Second).Slog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	queue.Handle(w, func(ctx context.Context, c ChargeCard) error {
		if c.Card == "0000" {
			return fmt.Errorf("order %s: card declined", c.Order)
		}
		return nil
	})
	for i, card := range []string{"4242", "0000", "5555"} {
		if err := queue.Dispatch(ctx, q, ChargeCard{Order: fmt.Sprintf("A-%d", i+1), Card: card}); err != nil {
			return err
		}
	}
	werr := w.Run(ctx)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	if err := <-srvDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if werr != nil && !errors.Is(werr, context.Canceled) {
		return werr
	}
	return nil
}

// requireLogin asks the browser for credentials (401 with a basic-auth
// challenge) when a request carries none that checkLogin accepts; the
// dashboard's Authorize then decides what the user may do.
func requireLogin(users map[string]user, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := checkLogin(r, users); !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="queues", charset="UTF-8"`)
			http.Error(w, "log in to see the queues", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkLogin returns the user r's basic-auth credentials name, comparing
// passwords in constant time.
func checkLogin(r *http.Request, users map[string]user) (user, bool) {
	name, password, ok := r.BasicAuth()
	if !ok {
		return user{}, false
	}
	u, known := users[name]
	if !known || u.password == "" {
		return user{}, false
	}
	got, want := sha256.Sum256([]byte(password)), sha256.Sum256([]byte(u.password))
	return u, subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
