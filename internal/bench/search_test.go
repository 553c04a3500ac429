package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestSearchScale measures a payload search among MERIDIAN_SEARCH_SCALE
// ready jobs (skipped when unset) on SQLite (a file in a temporary
// directory), and on PostgreSQL and MySQL/MariaDB where
// MERIDIAN_POSTGRES_DSN and MERIDIAN_MYSQL_DSN name them: the one match
// lies at 90% of the claim order. It follows each page's Next as the
// dashboard does (sqlqueue stops a call after about 40 ms) and logs the
// time to the first page holding the match and the jobs examined
// (JobPage.Scanned, summed), without the search index and with it
// (EnableSearchIndex, whose build time it logs too), and a field filter
// (payload.user_id = N) that matches the job before it, without the index.
// MERIDIAN_SEARCH_STORES (say "sqlite,postgres") measures only those. A measurement, not a
// gate: it fails only when the search does not find the match. A search
// that has not found it after three minutes stops, logging its pace.
//
//	MERIDIAN_SEARCH_SCALE=2000000 go test ./internal/bench -run TestSearchScale -v -timeout 90m
func TestSearchScale(t *testing.T) {
	searchScaleCap := 3 * time.Minute
	n, _ := strconv.Atoi(os.Getenv("MERIDIAN_SEARCH_SCALE"))
	if n <= 0 {
		t.Skip("MERIDIAN_SEARCH_SCALE is not set")
	}
	stores := []*SQL{SQLite(t.TempDir() + "/search.db")}
	if dsn := os.Getenv("MERIDIAN_POSTGRES_DSN"); dsn != "" {
		stores = append(stores, Postgres(dsn))
	}
	if dsn := os.Getenv("MERIDIAN_MYSQL_DSN"); dsn != "" {
		stores = append(stores, MySQL(dsn))
	}
	for _, s := range stores {
		if only := os.Getenv("MERIDIAN_SEARCH_STORES"); only != "" && !strings.Contains(only, s.name) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			ctx := t.Context()
			db, err := s.open(ctx, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			table := fmt.Sprintf("bench_search_%d", time.Now().UnixNano()%1e9)
			q, err := sqlqueue.New(db, sqlqueue.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := q.DisableSearchIndex(ctx); err != nil {
					t.Error(err)
				}
				if err := q.DropTables(ctx); err != nil {
					t.Error(err)
				}
			}()
			start := time.Now()
			const batch = 5000
			deep := n * 9 / 10
			for i := 0; i < n; i += batch {
				jobs := make([]queue.Job, 0, batch)
				for k := i; k < min(i+batch, n); k++ {
					p := fmt.Appendf(nil, `{"user_id":%d,"note":"order %d shipped"}`, k, k*7919%1000003)
					if k == deep {
						p = []byte(`{"user_id":1,"note":"needle-xyzzy"}`)
					}
					jobs = append(jobs, queue.Job{ID: queue.NewID(), Queue: "search", Name: "n", Payload: p})
				}
				if _, err := q.PushMany(ctx, jobs); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s: pushed %d jobs in %v", s.name, n, time.Since(start).Round(time.Millisecond))
			measureSearch := func(label, search string) {
				start := time.Now()
				f := queue.JobFilter{State: queue.StateReady, Queue: "search", Search: search}
				examined, calls := 0, 0
				for {
					if d := time.Since(start); d > searchScaleCap {
						t.Logf("%s %s: no match within %v: %d calls, %d jobs examined (%.0f a second)", s.name, label, d.Round(time.Millisecond), calls, examined, float64(examined)/d.Seconds())
						return
					}
					page, err := q.ListJobs(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					calls++
					examined += page.Scanned
					if len(page.Jobs) > 0 {
						break
					}
					if page.Next == "" {
						t.Fatalf("%s: no match found", label)
					}
					f.After = page.Next
				}
				t.Logf("%s %s: first page in %v, %d calls, %d jobs examined before the last call", s.name, label, time.Since(start).Round(time.Millisecond), calls, examined)
			}
			measure := func(label string) { measureSearch(label, "needle-xyzzy") }
			measure("scan")
			// A field filter, tested in Go on each examined payload: the
			// job just before the needle.
			measureSearch("field filter", fmt.Sprintf("payload.user_id = %d", deep-1))
			start = time.Now()
			err = q.EnableSearchIndex(ctx)
			if err != nil {
				t.Logf("%s: no index: %v", s.name, err)
				return
			}
			t.Logf("%s: index built in %v", s.name, time.Since(start).Round(time.Millisecond))
			measure("index")
			measure("index")
		})
	}
}
