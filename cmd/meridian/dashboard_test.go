package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// startDashboard runs `meridian dashboard` with args over a new SQLite file
// and returns its base URL.
func startDashboard(t *testing.T, args ...string) string {
	t.Helper()
	return startDashboardOn(t, newSQLite(t), args...)
}

// startDashboardOn runs `meridian dashboard` over dsn.
func startDashboardOn(t *testing.T, dsn string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- dashboardMain(ctx, append([]string{"--dsn", dsn, "--addr", "127.0.0.1:0"}, args...), io.Discard, func(a string) { addrc <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("dashboard: %v", err)
		}
	})
	select {
	case a := <-addrc:
		return "http://" + a
	case err := <-errc:
		t.Fatalf("dashboard did not start: %v", err)
	}
	return ""
}

func TestDashboardCommandBasicAuth(t *testing.T) {
	base := startDashboard(t, "--basic-auth", "ops:s3cret")
	cases := []struct {
		name, user, pass string
		want             int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"wrong password", "ops", "nope", http.StatusUnauthorized},
		{"right credentials", "ops", "s3cret", http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, base+"/queues/", nil)
			if c.user != "" {
				req.SetBasicAuth(c.user, c.pass)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != c.want {
				t.Errorf("status %d, want %d", res.StatusCode, c.want)
			}
			if c.want == http.StatusUnauthorized && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic") {
				t.Errorf("401 without a Basic challenge")
			}
		})
	}
}

func TestDashboardCommandPrefixAndReadOnly(t *testing.T) {
	base := startDashboard(t, "--prefix", "/ops", "--read-only")
	res, err := http.Get(base + "/ops/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/ops/queues/" {
		t.Fatalf("GET /ops/ ended at %s with %d", res.Request.URL.Path, res.StatusCode)
	}
	if strings.Contains(string(body), `method="post"`) {
		t.Error("read-only dashboard shows action forms")
	}
	res, err = http.Post(base+"/ops/queues/failed/flush", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("read-only POST = %d, want 403", res.StatusCode)
	}
}

func TestDashboardCommandNeedsDSN(t *testing.T) {
	t.Setenv("MERIDIAN_DSN", "")
	if err := dashboardMain(context.Background(), nil, io.Discard, nil); err == nil || !strings.Contains(err.Error(), "--dsn") {
		t.Errorf("no --dsn: %v", err)
	}
}

// serverURL returns the queue URL of the database server whose DSN is in
// env, on a table of the test's own; it skips (fails under CI=true) when
// env is unset.
func serverURL(t *testing.T, env string) string {
	t.Helper()
	return testutil.QueueURL(t, env, testutil.Name("dash_cli_"))
}

// The standalone dashboard over a database that an application filled:
// every page answers and shows the application's failed job.
func TestDashboardCommandOverEachDatabase(t *testing.T) {
	cases := []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", newSQLite},
		{"postgres", func(t *testing.T) string { return serverURL(t, "MERIDIAN_POSTGRES_DSN") }},
		{"mysql", func(t *testing.T) string { return serverURL(t, "MERIDIAN_MYSQL_DSN") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := c.dsn(t)
			q, err := queue.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if d, ok := q.(interface{ DropTables(context.Context) error }); ok && c.name != "sqlite" {
					if err := d.DropTables(context.Background()); err != nil {
						t.Errorf("dropping the test tables: %v", err)
					}
				}
				q.Close()
			})
			for i := range 3 {
				if err := queue.Dispatch(ctx, q, struct{ N int }{i}, queue.OnQueue("emails"), queue.Tags("t")); err != nil {
					t.Fatal(err)
				}
			}
			jobs, err := q.Reserve(ctx, []string{"emails"}, 1, time.Minute)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("reserve: %v, %v", jobs, err)
			}
			if err := testutil.Fail(ctx, q, jobs[0].Lease(), "<b>smtp</b> down"); err != nil {
				t.Fatal(err)
			}
			base := startDashboardOn(t, dsn)
			for _, p := range []string{"", "failed", "failed?q=N", "jobs?state=ready&queue=emails&tag=t", "jobs/" + jobs[0].ID, "queue/emails", "workers", "api/stats"} {
				res, err := http.Get(base + "/queues/" + p)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("%s: %d\n%s", p, res.StatusCode, body)
				}
				if strings.HasPrefix(p, "failed") && (!strings.Contains(string(body), jobs[0].ID) || !strings.Contains(string(body), "&lt;b&gt;smtp&lt;/b&gt; down")) {
					t.Errorf("%s lacks the job or its escaped error:\n%s", p, body)
				}
				if strings.HasPrefix(p, "jobs?") && strings.Count(string(body), `<tr data-id=`) != 2 {
					t.Errorf("%s: want the 2 ready jobs:\n%s", p, body)
				}
			}
		})
	}
}

// newSQLite returns the URL of a new SQLite file with the queue's tables.
func newSQLite(t *testing.T) string {
	t.Helper()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "jobs.db")
	var out, errOut bytes.Buffer
	if err := migrateMain(t.Context(), []string{"--dsn", dsn}, testIO(&out, &errOut)); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut.String())
	}
	return dsn
}
