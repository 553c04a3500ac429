package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The Metrics page and api/metrics: throughput, failures and the p50 and
// p95 runtimes per queue and per job class (job name) over the last hour
// (per-minute points), 24 hours or 7 days (hourly points, from a Source
// with HourlyMetrics over a store with the MetricsHistory ability).

// metricsWindow is one view of the metrics: how far back it looks and the
// length of its points.
type metricsWindow struct {
	Name string
	Span time.Duration
	Step time.Duration
}

// slots is the number of points of the window's charts.
func (w metricsWindow) slots() int { return int(w.Span / w.Step) }

// metricsWindows are the views, the first the default.
var metricsWindows = []metricsWindow{
	{"1h", time.Hour, time.Minute},
	{"24h", 24 * time.Hour, time.Hour},
	{"7d", 7 * 24 * time.Hour, time.Hour},
}

// errBadWindow is the error of a window= that names no view.
var errBadWindow = errors.New(`dashboard: window must be "1h", "24h" or "7d"`)

// windowOf returns the view named s ("" for the default).
func windowOf(s string) (metricsWindow, error) {
	if s == "" {
		return metricsWindows[0], nil
	}
	for _, w := range metricsWindows {
		if w.Name == s {
			return w, nil
		}
	}
	return metricsWindow{}, fmt.Errorf("%w, not %q", errBadWindow, s)
}

// HourlySource is a Source that also reads hourly run metrics, for the
// 24-hour and 7-day views: ForQueue's *QueueInspector (over a driver with
// the MetricsHistory ability; otherwise its HourlyMetrics fails with an
// error wrapping queue.ErrUnsupported). Without it those views say that
// the source keeps the last hour only.
type HourlySource interface {
	HourlyMetrics(ctx context.Context, since time.Time) ([]driver.MetricPoint, error)
}

// windowPoints reads the points of w ending at now.
func (h *handler) windowPoints(ctx context.Context, w metricsWindow, now time.Time) ([]driver.MetricPoint, error) {
	since := now.Add(-w.Span)
	if w.Step == time.Minute {
		return h.src.Metrics(ctx, since)
	}
	hs, ok := h.src.(HourlySource)
	if !ok {
		return nil, fmt.Errorf("dashboard: the %s view: the source keeps the last hour only: %w", w.Name, queue.ErrUnsupported)
	}
	return hs.HourlyMetrics(ctx, since)
}

// metricSeries is one queue's or job class's points over a window: one
// per step, oldest first, and their sum.
type metricSeries struct {
	Name  string
	Start time.Time
	Slots []driver.MetricPoint
	Total driver.MetricPoint
}

// seriesOf sums points into one series per queue and one per job name
// over w ending at now, each sorted by name. Points outside the window
// are left out; a point without a job name counts under "(none)".
func seriesOf(points []driver.MetricPoint, w metricsWindow, now time.Time) (queues, jobs []*metricSeries) {
	end := now.UTC().Truncate(w.Step)
	start := end.Add(-time.Duration(w.slots()-1) * w.Step)
	byQueue, byJob := map[string]*metricSeries{}, map[string]*metricSeries{}
	add := func(m map[string]*metricSeries, name string, i int, p driver.MetricPoint) {
		s := m[name]
		if s == nil {
			s = &metricSeries{Name: name, Start: start, Slots: make([]driver.MetricPoint, w.slots())}
			m[name] = s
		}
		s.Slots[i].Add(p)
		s.Total.Add(p)
	}
	for _, p := range points {
		i := int(p.Minute.UTC().Truncate(w.Step).Sub(start) / w.Step)
		if i < 0 || i >= w.slots() {
			continue
		}
		job := p.Name
		if job == "" {
			job = "(none)"
		}
		add(byQueue, p.Queue, i, p)
		add(byJob, job, i, p)
	}
	sorted := func(m map[string]*metricSeries) []*metricSeries {
		out := make([]*metricSeries, 0, len(m))
		for _, s := range m {
			out = append(out, s)
		}
		slices.SortFunc(out, func(a, b *metricSeries) int { return cmp.Compare(a.Name, b.Name) })
		return out
	}
	return sorted(byQueue), sorted(byJob)
}

// p50 and p95 are the point's runtime percentiles from its buckets.
func p50(p driver.MetricPoint) time.Duration { return p.Runtimes.Quantile(0.5, p.MaxRuntime) }
func p95(p driver.MetricPoint) time.Duration { return p.Runtimes.Quantile(0.95, p.MaxRuntime) }

// stepLabel formats a point's start for the charts' titles.
func stepLabel(t time.Time, w metricsWindow) string {
	if w.Step == time.Minute {
		return t.UTC().Format("15:04")
	}
	return t.UTC().Format("Mon 15:04")
}

// seriesCharts draws a series as a throughput chart (processed and
// failed per step, stacked) and a runtime chart (p50 and p95 per step).
func seriesCharts(s *metricSeries, w metricsWindow) (through, runtime *chart) {
	n := len(s.Slots)
	cw := max(chartW/n, 3)
	per := "/min"
	if w.Step == time.Hour {
		per = "/h"
	}
	span := "-" + w.Name
	vs := make([]int64, n)
	rs := make([]int64, n)
	for i, p := range s.Slots {
		vs[i] = p.Processed + p.Failed
		rs[i] = int64(p95(p))
	}
	top, _ := scaleTop(vs)
	top = max(top, slices.Max(vs))
	through = &chart{
		Title: "Throughput", W: n * cw, H: chartH,
		Label: "Jobs of " + s.Name + " processed and failed per " + strings.TrimPrefix(per, "/") + " over the last " + w.Name,
		Start: span, End: "now", YMax: display.Int(top) + per, YMid: display.Int(top/2) + per,
		Legend: []chartLegend{{"ok", "processed"}, {"bad", "failed"}},
		Empty:  top == 0, EmptyText: "No runs in the last " + w.Name + ".",
	}
	rtop := time.Duration(slices.Max(rs))
	if t, _ := scaleTop(rs); t > 0 {
		rtop = max(time.Duration(t), rtop)
	}
	runtime = &chart{
		Title: "Runtime", W: n * cw, H: chartH,
		Label: "p50 and p95 runtime of " + s.Name + " per " + strings.TrimPrefix(per, "/") + " over the last " + w.Name,
		Start: span, End: "now", YMax: fmtDuration(rtop), YMid: fmtDuration(rtop / 2),
		Legend: []chartLegend{{"avg", "p50"}, {"max", "p95"}},
		Empty:  rtop == 0, EmptyText: "No runs in the last " + w.Name + ".",
	}
	if top == 0 {
		return through, runtime
	}
	y := func(d time.Duration) int { return chartH - int(float64(min(d, rtop))/float64(rtop)*chartH) }
	var l50, l95 strings.Builder
	var d50, d95 []chartDot
	for i, p := range s.Slots {
		runs := p.Processed + p.Failed
		if runs == 0 {
			continue
		}
		at := stepLabel(s.Start.Add(time.Duration(i)*w.Step), w)
		okH := max(int(float64(p.Processed)/float64(top)*chartH), 0)
		badH := int(float64(p.Failed) / float64(top) * chartH)
		if p.Processed > 0 {
			okH = max(okH, 1)
			through.Bars = append(through.Bars, chartBar{X: i * cw, Y: chartH - okH, W: cw - 1, H: okH, Class: "ok",
				Title: at + ": " + display.Int(p.Processed) + " processed"})
		}
		if p.Failed > 0 {
			badH = max(badH, 1)
			through.Bars = append(through.Bars, chartBar{X: i * cw, Y: max(chartH-okH-badH, 0), W: cw - 1, H: badH, Class: "bad",
				Title: at + ": " + display.Int(p.Failed) + " failed"})
		}
		if rtop == 0 {
			continue
		}
		x := i*cw + cw/2
		a, b := y(p50(p)), y(p95(p))
		fmt.Fprintf(&l50, "%d,%d ", x, a)
		fmt.Fprintf(&l95, "%d,%d ", x, b)
		d50 = append(d50, chartDot{x, a, at + ": p50 " + fmtDuration(p50(p))})
		d95 = append(d95, chartDot{x, b, at + ": p95 " + fmtDuration(p95(p))})
	}
	runtime.Lines = []chartLine{
		{Points: strings.TrimSpace(l95.String()), Class: "max", Dots: d95},
		{Points: strings.TrimSpace(l50.String()), Class: "avg", Dots: d50},
	}
	return through, runtime
}

// metricsData is the model of the Metrics page.
type metricsData struct {
	Window  string
	Windows []windowTab
	Queues  []metricsRow
	Jobs    []metricsRow
	// Unsupported says why the view has no figures: the source keeps the
	// last hour only.
	Unsupported bool
	// Failed is set when the store did not answer.
	Failed bool
}

type windowTab struct {
	Name, URL string
	Active    bool
}

// metricsRow is one series on the page: its totals over the window and
// its two charts.
type metricsRow struct {
	Name                string
	Processed, Failed   int64
	P50, P95, Max       string
	Throughput, Runtime *chart
}

func rowsOf(ss []*metricSeries, w metricsWindow) []metricsRow {
	out := make([]metricsRow, len(ss))
	for i, s := range ss {
		th, rt := seriesCharts(s, w)
		out[i] = metricsRow{Name: s.Name, Processed: s.Total.Processed, Failed: s.Total.Failed,
			P50: fmtDuration(p50(s.Total)), P95: fmtDuration(p95(s.Total)), Max: fmtDuration(s.Total.MaxRuntime),
			Throughput: th, Runtime: rt}
	}
	return out
}

// metricsPage serves GET metrics?window=1h|24h|7d.
func (h *handler) metricsPage(w http.ResponseWriter, r *http.Request) {
	if !h.src.Abilities().Charts {
		h.fail(w, r, http.StatusNotFound, "This dashboard's source keeps no run metrics.", nil)
		return
	}
	win, err := windowOf(r.URL.Query().Get("window"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error(), nil)
		return
	}
	d := metricsData{Window: win.Name}
	for _, o := range metricsWindows {
		d.Windows = append(d.Windows, windowTab{Name: o.Name, URL: "metrics?window=" + url.QueryEscape(o.Name), Active: o == win})
	}
	now := time.Now()
	pts, err := h.windowPoints(r.Context(), win, now)
	switch {
	case errors.Is(err, queue.ErrUnsupported):
		d.Unsupported = true
	case err != nil:
		d.Failed = true
		h.cfg.logger.Warn("dashboard: reading the metrics", "window", win.Name, "err", err)
	default:
		qs, js := seriesOf(pts, win, now)
		d.Queues, d.Jobs = rowsOf(qs, win), rowsOf(js, win)
	}
	h.render(w, r, http.StatusOK, "metrics", h.newPage(w, r, "Metrics", "metrics", d))
}
