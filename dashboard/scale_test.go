package dashboard_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/internal/scale"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// scaleRowsEnv sets the size of TestScale's store; under CI=true it runs
// at 100,000 rows when unset (the smoke run).
const scaleRowsEnv = "MERIDIAN_SCALE_ROWS"

// TestScale fills a store per SQL dialect with the production shape of
// internal/scale, runs live traffic beside it (four workers with 4 handlers each on
// the served queues and 40 dispatches a second), and requests every page
// and API endpoint: once each from a new dashboard (cold) and then 40
// times (warm; 10 in CI's smoke run, which fills SQLite with SQL rather
// than through the API: see smokeFill). It fails on any 5xx answer, never
// on timing; the timings
// are logged as a table (and written to $MERIDIAN_SCALE_OUT when set)
// for docs/benchmarks.md. MERIDIAN_SCALE_STATS sets the planner's
// statistics of the jobs table: missing (the default: never analyzed; the
// shared PostgreSQL runs with autovacuum off), stale (analyzed while
// empty, before the fill) or fresh (analyzed after it).
//
// For the measurement, by hand: MERIDIAN_SCALE_DIALECTS picks the
// dialects (postgres,mysql,sqlite); MERIDIAN_SCALE_FILL=sql fills the
// table with one INSERT ... SELECT per 100,000 rows instead of through
// the queue's API (minutes instead of an hour at 2,000,000 rows; the
// rows are then counted as the migrations count them); MERIDIAN_SCALE_SERVERS=private
// runs PostgreSQL and MariaDB servers of the test's own
// (testutil.PostgresServer, testutil.MariaDBServer) and restarts the
// server before each cold request, so a cold request meets an empty
// buffer cache (SQLite's file stays in the OS page cache: its cold
// request is a new dashboard only). Run it with
//
//	MERIDIAN_SCALE_ROWS=1000000 go test -run '^TestScale$' -v -timeout 2h ./dashboard
func TestScale(t *testing.T) {
	rows, smoke := 0, false
	if v := os.Getenv(scaleRowsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("%s=%q: want a number of rows, at least 1000", scaleRowsEnv, v)
		}
		rows = n
	} else if testutil.CI() {
		rows, smoke = 100000, true
	} else {
		t.Skipf("set %s (e.g. 100000) to run the scale benchmark; CI runs it at 100,000 rows", scaleRowsEnv)
	}
	private := os.Getenv("MERIDIAN_SCALE_SERVERS") == "private"
	dialects := []struct {
		name string
		// store returns the queue URL of a new table, and a restart of its
		// server (nil when it cannot be restarted).
		store func(t *testing.T, table string) (string, func(testing.TB))
		// smokeFill is how CI's smoke run fills the store ("" through the
		// queue's API, as scale.Fill does; "sql" as scaleFillSQL does):
		// under -race, SQLite's engine runs instrumented in the test
		// process, and the API fill of 100,000 jobs took over 6 minutes.
		smokeFill string
	}{
		{"sqlite", func(t *testing.T, table string) (string, func(testing.TB)) {
			return "sqlite://" + filepath.Join(t.TempDir(), "scale.db") + "?table=" + table, nil
		}, "sql"},
		{"postgres", func(t *testing.T, table string) (string, func(testing.TB)) {
			if private {
				s := testutil.PostgresServer(t, "the scale benchmark", "shared_buffers=256MB")
				return testutil.DSNQueueURL(t, s.Driver, s.Source, table), s.Restart
			}
			return testutil.QueueURL(t, testutil.PostgresEnv, table), nil
		}, ""},
		{"mysql", func(t *testing.T, table string) (string, func(testing.TB)) {
			if private {
				s := testutil.MariaDBServer(t, "the scale benchmark", "256M", "scale")
				return testutil.DSNQueueURL(t, s.Driver, s.Source, table), s.Restart
			}
			return testutil.QueueURL(t, testutil.MySQLEnv, table), nil
		}, ""},
	}
	only := os.Getenv("MERIDIAN_SCALE_DIALECTS")
	stats := cmp.Or(os.Getenv("MERIDIAN_SCALE_STATS"), "missing")
	if !slices.Contains([]string{"missing", "stale", "fresh"}, stats) {
		t.Fatalf("MERIDIAN_SCALE_STATS=%q: want missing, stale or fresh", stats)
	}
	var tables []string
	for _, d := range dialects {
		if only != "" && !slices.Contains(strings.Split(only, ","), d.name) {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			queueURL, restart := d.store(t, testutil.Name("dash_scale_"))
			u, err := url.Parse(queueURL)
			if err != nil {
				t.Fatal(err)
			}
			v := u.Query()
			v.Set("retention", "24h")
			u.RawQuery = v.Encode()
			run := scaleRunConfig{dialect: d.name, queueURL: u.String(), rows: rows, stats: stats, restart: restart,
				fill: os.Getenv("MERIDIAN_SCALE_FILL"), warmRuns: 40}
			if smoke {
				run.fill, run.warmRuns = d.smokeFill, 10
			}
			tables = append(tables, scaleRun(t, run))
		})
	}
	if out := os.Getenv("MERIDIAN_SCALE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(strings.Join(tables, "\n")), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// scaleRunConfig is one store's run of TestScale.
type scaleRunConfig struct {
	dialect, queueURL string
	rows              int
	stats             string           // the planner's statistics: missing, stale or fresh
	restart           func(testing.TB) // restarts the server; nil when it cannot
	fill              string           // "sql": scaleFillSQL; "": scale.Fill, through the queue's API
	warmRuns          int              // warm requests per endpoint
}

// scaleRun is TestScale on one store; it returns the timings as a
// Markdown table.
func scaleRun(t *testing.T, c scaleRunConfig) string {
	dialect, queueURL, rows, stats, restart := c.dialect, c.queueURL, c.rows, c.stats, c.restart
	ctx := context.Background()
	q, err := queue.Open(ctx, queueURL)
	if err != nil {
		t.Fatalf("opening %s: %v", dialect, err)
	}
	t.Cleanup(func() {
		if d, ok := q.(interface{ DropTables(context.Context) error }); ok {
			if err := d.DropTables(context.Background()); err != nil {
				t.Errorf("dropping the scale tables: %v", err)
			}
		}
		if c, ok := q.(io.Closer); ok {
			c.Close()
		}
	})
	tq, ok := q.(interface{ Table() string })
	if !ok {
		t.Fatalf("%T does not name its table", q)
	}
	db := scaleDB(t, dialect, queueURL)
	analyze := func() {
		t.Helper()
		stmt := "ANALYZE " + tq.Table()
		if dialect == "mysql" {
			stmt = "ANALYZE TABLE " + tq.Table()
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if stats == "stale" {
		analyze()
	}
	shape := scale.Shape{Jobs: rows}
	start := time.Now()
	var counts scale.Counts
	if c.fill == "sql" {
		counts = scaleFillSQL(t, db, dialect, tq.Table(), shape)
	} else if counts, err = scale.Fill(ctx, q, shape); err != nil {
		t.Fatal(err)
	}
	if stats == "fresh" {
		analyze()
	}
	t.Logf("%s: filled %d rows in %v: %+v", dialect, rows, time.Since(start).Round(time.Second), counts)
	dead, err := q.DeadLetters(ctx, "", 1)
	if err != nil || len(dead) == 0 {
		t.Fatalf("DeadLetters = %d, %v", len(dead), err)
	}
	scaleTotalsMatch(t, q, db, dialect, tq.Table())

	// Live traffic: four workers on the served queues, whose handlers
	// take a while (so that jobs are seen running, and the workers hold
	// jobs ahead as busy ones do), and a steady producer.
	const workers = 4
	var ws []*queue.Worker
	runDone := make(chan error, workers)
	for range workers {
		w := queue.NewWorker(q).Queues(shape.Served()...).Concurrency(4).Poll(100 * time.Millisecond).Slog(slog.New(slog.DiscardHandler))
		queue.Handle(w, func(ctx context.Context, _ scale.Job) error {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			return nil
		})
		ws = append(ws, w)
		go func() { runDone <- w.Run(context.Background()) }()
	}
	var dispatchErrors atomic.Int64
	stopProducer := make(chan struct{})
	var producer sync.WaitGroup
	producer.Go(func() {
		tick := time.NewTicker(25 * time.Millisecond) // 40 a second
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopProducer:
				return
			case <-tick.C:
				served := shape.Served()
				if err := queue.Dispatch(ctx, q, scale.Job{N: -i}, queue.OnQueue(served[i%len(served)])); err != nil {
					if restart == nil {
						t.Errorf("live dispatch: %v", err)
						return
					}
					dispatchErrors.Add(1) // the server restarts between cold requests
				}
			}
		}
	})
	defer func() {
		close(stopProducer)
		producer.Wait()
		for _, w := range ws {
			w.Stop()
		}
		for range ws {
			if err := <-runDone; err != nil {
				t.Errorf("worker: %v", err)
			}
		}
	}()

	endpoints := []string{
		"", "failed", "failed?q=customer", "jobs?state=ready", "jobs?state=scheduled", "jobs?state=running",
		"jobs?state=done", "jobs?state=cancelled", "jobs?state=ready&queue=" + scale.Backlog,
		"queue/q1", "queue/" + scale.Backlog, "jobs/" + dead[0].ID, "workers", "periodic",
		"api/stats", "api/jobs?state=ready", "api/jobs?state=dead", "api/jobs/" + dead[0].ID,
		"api/metrics", "api/workers", "api/periodic",
	}
	warmRuns := c.warmRuns
	var table strings.Builder
	fmt.Fprintf(&table, "%s, %s rows (%+v), statistics %s\n\n| endpoint | cold | warm p50 | warm p95 |\n|---|---|---|---|\n", dialect, display.Int(int64(rows)), counts, stats)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(srv *httptest.Server, ep string) time.Duration {
		t0 := time.Now()
		res, err := client.Get(srv.URL + "/admin/queues/" + ep)
		if err != nil {
			t.Errorf("GET %s: %v", ep, err)
			return 0
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		took := time.Since(t0)
		if res.StatusCode >= 500 {
			t.Errorf("GET %s (%s): %d", ep, dialect, res.StatusCode)
		}
		return took
	}
	newServer := func() *httptest.Server {
		mux := http.NewServeMux()
		mux.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(dashboard.ForQueue(q))))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv
	}
	warm := newServer()
	for _, ep := range endpoints {
		if restart != nil {
			restart(t) // an empty buffer cache for the cold request
		}
		cold := get(newServer(), ep) // a new dashboard: nothing shared or cached yet
		var runs []time.Duration
		for range warmRuns {
			runs = append(runs, get(warm, ep))
		}
		slices.SortFunc(runs, cmp.Compare)
		p50, p95 := runs[len(runs)/2], runs[len(runs)*95/100]
		fmt.Fprintf(&table, "| `%s` | %s | %s | %s |\n", ep, ms(cold), ms(p50), ms(p95))
	}
	if restart != nil {
		fmt.Fprintf(&table, "\nThe server was restarted before each cold request; %d live dispatches failed while it restarted.\n", dispatchErrors.Load())
	}
	t.Logf("\n%s", table.String())
	return table.String()
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

// scaleTotalsMatch checks that the figures' totals by state (the
// overview's) are the store's: SELECT count(*) per state, scheduled ones
// by their run time, while nothing runs.
func scaleTotalsMatch(t *testing.T, q queue.Queue, db *sql.DB, dialect, table string) {
	t.Helper()
	ctx := context.Background()
	stats, err := q.(driver.Inspector).QueueStats(ctx)
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	var got [5]int64 // ready, scheduled, failed, done, cancelled
	for _, s := range stats {
		if s.Running.N != 0 {
			t.Errorf("queue %s: %d running before any worker ran", s.Queue, s.Running.N)
		}
		for i, n := range []int64{s.Ready.N, s.Scheduled.N, s.Dead.N, s.Done.N, s.Cancelled.N} {
			got[i] += n
		}
	}
	query := `SELECT
  COALESCE(SUM(CASE WHEN state = 'pending' AND run_at <= ? THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN state = 'pending' AND run_at > ? THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN state = 'dead' THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN state = 'done' THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END), 0)
FROM ` + table
	args := []any{time.Now().UnixMicro()}
	if dialect == "postgres" {
		query = strings.ReplaceAll(query, "?", "$1")
	} else {
		args = append(args, args[0])
	}
	var want [5]int64
	if err := db.QueryRowContext(ctx, query, args...).Scan(&want[0], &want[1], &want[2], &want[3], &want[4]); err != nil {
		t.Fatalf("counting the table: %v", err)
	}
	if got != want {
		t.Errorf("the figures' totals (ready, scheduled, failed, done, cancelled) = %v, count(*) = %v", got, want)
	}
}
