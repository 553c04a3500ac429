// Command monitoring runs a Meridian worker with Prometheus metrics at
// /metrics next to the dashboard at /admin/queues/, and a long-wait alert
// that logs (swap in alert.Webhook for Slack).
//
//	go run ./examples/monitoring                              # in memory
//	go run ./examples/monitoring -queue 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	curl -s localhost:8080/metrics | grep meridian_
//
// It dispatches a few jobs, of which every third fails its first attempt
// and is retried.
package main

import (
	"context"
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meridianjobs/meridian/dashboard"
	_ "github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/observe/alert"
	"github.com/meridianjobs/meridian/observe/promqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// Resize is the example's job.
type Resize struct{ N int }

func main() {
	url := flag.String("queue", "memory://", "queue URL")
	addr := flag.String("addr", "localhost:8080", "serve /metrics and the dashboard here")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *url, *addr, 9, 10*time.Second, nil); err != nil {
		fmt.Fprintln(os.Stderr, "monitoring:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done after dispatching jobs Resize jobs, reading
// the store at most once per ttl for the metrics; ready, when not nil, is
// told the listening address.
func run(ctx context.Context, url, addr string, jobs int, ttl time.Duration, ready func(addr string)) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	q, err := queue.Open(ctx, url)
	if err != nil {
		return err
	}
	defer q.Close()
	in, ok := q.(driver.Inspector)
	if !ok {
		return errors.New("the driver has no inspection side")
	}

	// Metrics: the worker's counters and histograms, and the store's depth
	// and oldest-ready age read at scrape time (cached for ttl).
	reg := prometheus.NewRegistry()
	m, err := promqueue.New(reg, promqueue.WithInspector(in), promqueue.WithCacheTTL(ttl))
	if err != nil {
		return err
	}

	// Alerts: a job waiting over a minute, or a third of attempts failing.
	// With several processes, pass alert.WithClaimer(alert.NewSQLClaimer(...))
	// so that only one calls the hook per transition.
	al := alert.New(in, func(ctx context.Context, a alert.Alert) error {
		log.Warn(a.Text())
		return nil
	}, alert.WithThresholds(alert.Threshold{MaxWait: time.Minute, MaxFailureRate: 0.33}), alert.WithLogger(log))
	go func() { _ = al.Run(ctx) }()

	// The dashboard marks the queues whose alerts are firing.
	firing := func(context.Context) map[string][]string {
		out := map[string][]string{}
		for _, a := range al.Firing() {
			out[a.Queue] = append(out[a.Queue], a.Text())
		}
		return out
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(dashboard.ForQueue(q), dashboard.Warnings(firing))))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	log.Info("monitoring: metrics at http://" + ln.Addr().String() + "/metrics, dashboard at /admin/queues/")
	if ready != nil {
		ready(ln.Addr().String())
	}

	w := queue.NewWorker(q).Slog(log).MaxRetry(3).Backoff(0)
	m.Instrument(w)
	queue.Handle(w, func(ctx context.Context, r Resize) error {
		j, _ := queue.JobFromContext(ctx)
		if r.N%3 == 0 && j.Attempts == 1 {
			return fmt.Errorf("image %d: storage busy", r.N)
		}
		return nil
	})
	for n := 1; n <= jobs; n++ {
		if err := queue.Dispatch(ctx, q, Resize{N: n}); err != nil {
			return err
		}
	}
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
