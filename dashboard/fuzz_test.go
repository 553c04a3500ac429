package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// FuzzQueryParameters sends any query string to every page and endpoint
// that reads one: the answer is a page or a JSON error with a 2xx, 303 or
// 4xx status, never a 5xx or a panic, and an HTML page never echoes the
// input unescaped.
func FuzzQueryParameters(f *testing.F) {
	for _, seed := range []string{
		"state=ready", "state=failed&queue=emails&name=Send&tag=a&q=ada", "state=bogus", "after=zz%21", "after=" + strings.Repeat("A", 300),
		"page=-1", "page=99999999999999999999", "limit=0", "limit=-5", "limit=1000000", "since=yesterday", "q=%00", "q=%ff%fe",
		"state=cancelled&q=<script>alert(1)</script>", "queue=%E2%80%AE", "flash=retried&n=-9223372036854775808", "%zz", "a=b;c=d",
		"do=retry&q=<script>alert(1)</script>", "do=cancel&state=ready&tag=ta", "do=forget&state=dead&name=x", "id=..%2Ffailed", "id=%00",
	} {
		f.Add(seed)
	}
	q := memqueue.New()
	ctx := context.Background()
	for i := range 30 {
		opts := []queue.Option{queue.OnQueue([]string{"emails", "reports"}[i%2]), queue.Tags("t" + string(rune('a'+i%3)))}
		if i%5 == 0 {
			opts = append(opts, queue.Delay(time.Hour))
		}
		if _, _, err := queue.Enqueue(ctx, q, cancelMe{i}, opts...); err != nil {
			f.Fatal(err)
		}
	}
	h := dashboard.Handler(dashboard.ForQueue(q))
	paths := []string{"", "failed", "jobs", "queue/emails", "workers", "periodic", "sequences", "api/stats", "api/jobs", "api/metrics", "api/workers", "api/periodic", "confirm"}
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := url.ParseRequestURI("/queues/?" + raw); err != nil || strings.ContainsAny(raw, " #") {
			t.Skip("not a query string a client can send")
		}
		for _, p := range paths {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/queues/"+p+"?"+raw, nil)
			req.RemoteAddr = "127.0.0.1:1234"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if raw == "state=ready" && rec.Code != http.StatusOK && p != "confirm" {
				t.Fatalf("GET %s?%s answered %d: the fuzz target is not reaching the pages", p, raw, rec.Code)
			}
			if rec.Code >= 500 {
				t.Fatalf("GET %s?%s answered %d:\n%s", p, raw, rec.Code, rec.Body)
			}
			if strings.Contains(rec.Header().Get("Content-Type"), "html") && strings.Contains(rec.Body.String(), "<script>alert(") {
				t.Fatalf("GET %s?%s echoed a script tag:\n%s", p, raw, rec.Body)
			}
		}
	})
}
