package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// BenchmarkPages measures the pages over a memqueue holding many ready and
// dead jobs: every page reads through the bounded Inspector calls, so its
// cost depends on the page size, not on how many jobs there are.
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	q := memqueue.New()
	const n = 100_000
	jobs := make([]queue.Job, n)
	for i := range jobs {
		jobs[i] = queue.Job{ID: driver.NewID(), Queue: []string{"emails", "reports"}[i%2], Name: "Job", Payload: []byte(`{"n":1}`)}
	}
	if _, err := queue.PushMany(ctx, q, jobs); err != nil {
		b.Fatal(err)
	}
	for range 10 {
		got, err := q.Reserve(ctx, []string{"emails"}, 500, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		for _, j := range got {
			if err := testutil.Fail(ctx, q, j.Lease(), "boom"); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("new-handler", func(b *testing.B) {
		for b.Loop() {
			dashboard.Handler(dashboard.ForQueue(q))
		}
	})
	benchPages(b, q, []string{"", "failed", "jobs?state=ready&queue=reports", "queue/emails"}...)
}

// benchPages measures each of pages (paths under /admin/queues/) served by
// a new driver-mode handler over q.
func benchPages(b *testing.B, q queue.Queue, pages ...string) {
	for _, p := range pages {
		b.Run("page="+p, func(b *testing.B) {
			for b.Loop() {
				// A new handler each time: the figures it shares between
				// requests for a few seconds would hide the store's cost.
				h := http.StripPrefix("/admin", dashboard.Handler(dashboard.ForQueue(q)))
				req := httptest.NewRequest(http.MethodGet, "/admin/queues/"+p, nil)
				req.RemoteAddr = "127.0.0.1:1"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", p, rec.Code)
				}
			}
		})
	}
}
