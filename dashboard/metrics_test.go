package dashboard_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// metricsSite serves a dashboard over a memqueue that observed runs of
// two job classes in two queues: now, three hours ago and two days ago.
func metricsSite(t *testing.T) *site {
	t.Helper()
	q := memqueue.New()
	now := time.Now()
	for _, r := range []driver.RunRecord{
		{Queue: "mail", Name: "SendEmail", Start: now, Runtime: 10 * time.Millisecond, Outcome: driver.OutcomeDone},
		{Queue: "mail", Name: "SendEmail", Start: now, Runtime: 12 * time.Millisecond, Outcome: driver.OutcomeDone},
		{Queue: "mail", Name: "SendEmail", Start: now, Runtime: 900 * time.Millisecond, Outcome: driver.OutcomeFailed},
		{Queue: "mail", Name: "Digest", Start: now.Add(-3 * time.Hour), Runtime: 2 * time.Second, Outcome: driver.OutcomeDone},
		{Queue: "reports", Name: "Digest", Start: now.Add(-48 * time.Hour), Runtime: 2 * time.Second, Outcome: driver.OutcomeDone},
	} {
		q.ObserveRun(r)
	}
	return serve(t, dashboard.ForQueue(q))
}

// seriesRows returns the rows of the Metrics page's section id by name:
// its processed and failed figures.
func seriesRows(t *testing.T, doc *html.Node, id string) map[string][2]string {
	t.Helper()
	h := find(doc, byID(id))
	if h == nil {
		t.Fatalf("no section %s", id)
	}
	out := map[string][2]string{}
	for _, tr := range findAll(h.Parent, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-series") != "" }) {
		stat := func(s string) string {
			return strings.TrimSpace(text(find(tr, func(n *html.Node) bool { return attr(n, "data-stat") == s })))
		}
		out[attr(tr, "data-series")] = [2]string{stat("processed"), stat("failed")}
	}
	return out
}

func TestMetricsPageWindows(t *testing.T) {
	t.Parallel()
	s := metricsSite(t)
	for _, c := range []struct {
		window      string
		queues, job map[string][2]string
	}{
		{"", map[string][2]string{"mail": {"2", "1"}}, map[string][2]string{"SendEmail": {"2", "1"}}},
		{"24h", map[string][2]string{"mail": {"3", "1"}}, map[string][2]string{"SendEmail": {"2", "1"}, "Digest": {"1", "0"}}},
		{"7d", map[string][2]string{"mail": {"3", "1"}, "reports": {"1", "0"}}, map[string][2]string{"SendEmail": {"2", "1"}, "Digest": {"2", "0"}}},
	} {
		t.Run("window="+c.window, func(t *testing.T) {
			p := s.page("metrics?window=" + c.window)
			if got := seriesRows(t, p.Doc, "by-queue"); !equalRows(got, c.queues) {
				t.Errorf("by queue = %v, want %v", got, c.queues)
			}
			if got := seriesRows(t, p.Doc, "by-job"); !equalRows(got, c.job) {
				t.Errorf("by job class = %v, want %v", got, c.job)
			}
			// A throughput and a runtime chart per series.
			if n, want := len(findAll(p.Doc, byTag("svg"))), 2*(len(c.queues)+len(c.job)); n != want {
				t.Errorf("%d charts, want %d", n, want)
			}
		})
	}
	if r := s.get(s.url("metrics?window=2w")); r.StatusCode != http.StatusBadRequest {
		t.Errorf("window=2w: %d, want 400", r.StatusCode)
	}
	if r := s.get(s.url("api/metrics?window=2w")); r.StatusCode != http.StatusBadRequest {
		t.Errorf("api/metrics?window=2w: %d, want 400", r.StatusCode)
	}
}

func equalRows(a, b map[string][2]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMetricsAPIPercentiles checks api/metrics' series: the per-job-class
// sums and the p50 and p95 runtimes read from the buckets.
func TestMetricsAPIPercentiles(t *testing.T) {
	t.Parallel()
	s := metricsSite(t)
	var got struct {
		Window      string `json:"window"`
		StepSeconds int    `json:"step_seconds"`
		Jobs        []struct {
			Name      string  `json:"name"`
			Processed int64   `json:"processed"`
			Failed    int64   `json:"failed"`
			P50       float64 `json:"p50_runtime_ms"`
			P95       float64 `json:"p95_runtime_ms"`
			Points    []struct {
				At        time.Time `json:"at"`
				Processed int64     `json:"processed"`
			} `json:"points"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(s.page("api/metrics?window=7d").Body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Window != "7d" || got.StepSeconds != 3600 || len(got.Jobs) != 2 {
		t.Fatalf("api/metrics?window=7d = %+v, want 7d by hour, two job classes", got)
	}
	i := slices.IndexFunc(got.Jobs, func(j struct {
		Name      string  `json:"name"`
		Processed int64   `json:"processed"`
		Failed    int64   `json:"failed"`
		P50       float64 `json:"p50_runtime_ms"`
		P95       float64 `json:"p95_runtime_ms"`
		Points    []struct {
			At        time.Time `json:"at"`
			Processed int64     `json:"processed"`
		} `json:"points"`
	}) bool {
		return j.Name == "SendEmail"
	})
	if i < 0 {
		t.Fatalf("no SendEmail series: %+v", got.Jobs)
	}
	se := got.Jobs[i]
	// Runtimes 10, 12 and 900ms: the p50 is within √2 of 12ms, the p95
	// within √2 of 900ms.
	if se.Processed != 2 || se.Failed != 1 || se.P50 < 12/1.42 || se.P50 > 12*1.42 || se.P95 < 900/1.42 || se.P95 > 900*1.42 {
		t.Errorf("SendEmail = %+v, want 2 processed, 1 failed, p50 about 12ms and p95 about 900ms", se)
	}
	if len(se.Points) != 1 || se.Points[0].Processed != 2 || !se.Points[0].At.Equal(se.Points[0].At.Truncate(time.Hour)) {
		t.Errorf("SendEmail points = %+v, want one hour with 2 processed", se.Points)
	}
}
