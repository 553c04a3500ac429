// Command demo runs a Meridian worker over a queue chosen by URL, feeds it a
// stream of jobs (every tenth one fails, so retries and dead letters
// happen), and serves the dashboard at http://localhost:8080/admin/queues/.
//
//	go run ./examples/demo                                  # SQLite file meridian-demo.db
//	go run ./examples/demo -queue memory://                 # in memory
//	go run ./examples/demo -queue 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./examples/demo -queue 'mysql://root@127.0.0.1:3306/test'
//
// The same job code runs on every driver; only the URL changes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	_ "github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	_ "github.com/meridianjobs/meridian/redisqueue"
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// SendWelcomeEmail is a job: any JSON-encodable struct.
type SendWelcomeEmail struct {
	UserID uint64 `json:"user_id"`
	Email  string `json:"email"`
}

// ResizeImage is a second kind of job, on its own queue.
type ResizeImage struct {
	Path  string `json:"path"`
	Width int    `json:"width"`
}

func main() {
	url := flag.String("queue", envOr("MERIDIAN_QUEUE_URL", "sqlite://meridian-demo.db"), "queue URL: sqlite://file, memory://, postgres://..., mysql://..., redis://host:6379/0")
	rate := flag.Duration("every", 200*time.Millisecond, "dispatch a job this often")
	addr := flag.String("addr", "localhost:8080", "serve the dashboard here (empty: no dashboard)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *url, *rate, *addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// run runs the demo until ctx is done. When ready is not nil it is told the
// dashboard's address once it listens.
func run(ctx context.Context, url string, every time.Duration, addr string, ready func(addr string)) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	q, err := queue.Open(ctx, url)
	if err != nil {
		return err
	}
	defer q.Close()

	if addr != "" {
		// The dashboard, mounted under /admin/queues/ of the app's own mux.
		// Without an Authorize option it serves loopback requests only.
		mux := http.NewServeMux()
		mux.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(dashboard.ForQueue(q))))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		log.Info("demo: dashboard at http://" + ln.Addr().String() + "/admin/queues/")
		if ready != nil {
			ready(ln.Addr().String())
		}
	}

	w := queue.NewWorker(q).
		Slog(log).
		Queues("emails", "images").
		Concurrency(4).
		MaxRetry(3).
		BackoffPolicy(queue.Delays(time.Second, 2*time.Second)).
		OnFailed(func(j queue.Job, err error) {
			log.Warn("demo: job moved to the dead letters", "job", j.ID, "name", j.Name, "err", err)
		})
	queue.Handle(w, func(ctx context.Context, j SendWelcomeEmail) error {
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		if j.UserID%10 == 0 {
			return errors.New("mail server refused the address")
		}
		log.Info("demo: sent welcome email", "user", j.UserID, "email", j.Email)
		return nil
	})
	queue.Handle(w, func(ctx context.Context, j ResizeImage) error {
		time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
		log.Info("demo: resized image", "path", j.Path, "width", j.Width)
		return nil
	})

	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()

	log.Info("demo: dispatching jobs; press Ctrl-C to stop", "queue", url)
	t := time.NewTicker(every)
	defer t.Stop()
	for n := uint64(1); ; n++ {
		select {
		case <-ctx.Done():
			log.Info("demo: shutting down; running jobs finish first")
			return <-errc
		case <-t.C:
		}
		var err error
		if n%3 == 0 {
			err = queue.Dispatch(ctx, q, ResizeImage{Path: fmt.Sprintf("/uploads/%d.png", n), Width: 640}, queue.OnQueue("images"))
		} else {
			err = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: n, Email: fmt.Sprintf("user%d@example.com", n)}, queue.OnQueue("emails"))
		}
		if err != nil {
			log.Error("demo: dispatch", "err", err)
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
