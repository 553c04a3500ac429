package dashboard

import (
	"fmt"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/queue"
)

// Charts are drawn on the server as SVG: a fixed grid of one column per
// minute over the last hour. They use presentation attributes and CSS
// classes only, so the Content-Security-Policy needs no inline styles.

const (
	chartMinutes = 60
	chartW       = 600
	chartH       = 140
	colW         = chartW / chartMinutes
)

// chart is the template model of one SVG chart.
type chart struct {
	Title  string
	Label  string // the accessible description
	W, H   int
	Bars   []chartBar
	Lines  []chartLine
	YMax   string // label of the top of the scale
	Start  string // label of the left edge
	End    string // label of the right edge
	Legend []chartLegend
	Empty  bool
}

type chartBar struct {
	X, Y, W, H int
	Class      string
	Title      string
}

type chartLine struct {
	Points string
	Class  string
	Dots   []chartDot // the points again, so a lone minute still shows
}

type chartDot struct {
	X, Y  int
	Title string
}

type chartLegend struct {
	Class, Text string
}

// minuteAgg sums the points of one minute.
type minuteAgg struct {
	processed, failed int64
	runtime, maxRun   time.Duration
}

// bucket sums points (of queueName, or of every queue when it is "") into
// chartMinutes minutes ending with the minute of now.
func bucket(points []queue.MetricPoint, queueName string, now time.Time) (start time.Time, mins [chartMinutes]minuteAgg) {
	end := now.UTC().Truncate(time.Minute)
	start = end.Add(-(chartMinutes - 1) * time.Minute)
	for _, p := range points {
		if queueName != "" && p.Queue != queueName {
			continue
		}
		i := int(p.Minute.UTC().Truncate(time.Minute).Sub(start) / time.Minute)
		if i < 0 || i >= chartMinutes {
			continue
		}
		m := &mins[i]
		m.processed += p.Processed
		m.failed += p.Failed
		m.runtime += p.TotalRuntime
		m.maxRun = max(m.maxRun, p.MaxRuntime)
	}
	return start, mins
}

// throughputChart draws processed (and failed) attempts per minute as
// stacked bars.
func throughputChart(points []queue.MetricPoint, queueName string, now time.Time) *chart {
	start, mins := bucket(points, queueName, now)
	var top int64
	for _, m := range mins {
		top = max(top, m.processed+m.failed)
	}
	c := &chart{
		Title: "Throughput", W: chartW, H: chartH,
		Label: "Jobs processed and failed per minute over the last hour",
		Start: "-60m", End: "now", YMax: display.Int(top) + "/min",
		Legend: []chartLegend{{"ok", "processed"}, {"bad", "failed"}},
		Empty:  top == 0,
	}
	if top == 0 {
		return c
	}
	for i, m := range mins {
		x := i * colW
		at := start.Add(time.Duration(i) * time.Minute).Format("15:04")
		okH := int(float64(m.processed) / float64(top) * chartH)
		badH := int(float64(m.failed) / float64(top) * chartH)
		if m.processed > 0 {
			okH = max(okH, 1)
			c.Bars = append(c.Bars, chartBar{X: x, Y: chartH - okH, W: colW - 1, H: okH, Class: "ok",
				Title: at + ": " + display.Int(m.processed) + " processed"})
		}
		if m.failed > 0 {
			badH = max(badH, 1)
			c.Bars = append(c.Bars, chartBar{X: x, Y: max(chartH-okH-badH, 0), W: colW - 1, H: badH, Class: "bad",
				Title: at + ": " + display.Int(m.failed) + " failed"})
		}
	}
	return c
}

// runtimeChart draws the average and maximum runtime per minute as lines.
func runtimeChart(points []queue.MetricPoint, queueName string, now time.Time) *chart {
	start, mins := bucket(points, queueName, now)
	var top time.Duration
	for _, m := range mins {
		top = max(top, m.maxRun)
	}
	c := &chart{
		Title: "Runtime", W: chartW, H: chartH,
		Label: "Average and maximum job runtime per minute over the last hour",
		Start: "-60m", End: "now", YMax: fmtDuration(top),
		Legend: []chartLegend{{"avg", "average"}, {"max", "maximum"}},
		Empty:  top == 0,
	}
	if top == 0 {
		return c
	}
	var avg, mx strings.Builder
	var avgDots, maxDots []chartDot
	for i, m := range mins {
		n := m.processed + m.failed
		if n == 0 {
			continue
		}
		x := i*colW + colW/2
		a := chartH - int(float64(m.runtime)/float64(n)/float64(top)*chartH)
		y := chartH - int(float64(m.maxRun)/float64(top)*chartH)
		fmt.Fprintf(&avg, "%d,%d ", x, a)
		fmt.Fprintf(&mx, "%d,%d ", x, y)
		at := start.Add(time.Duration(i) * time.Minute).Format("15:04")
		avgDots = append(avgDots, chartDot{x, a, fmt.Sprintf("%s: average %s", at, fmtDuration(m.runtime/time.Duration(n)))})
		maxDots = append(maxDots, chartDot{x, y, fmt.Sprintf("%s: maximum %s", at, fmtDuration(m.maxRun))})
	}
	c.Lines = []chartLine{
		{Points: strings.TrimSpace(mx.String()), Class: "max", Dots: maxDots},
		{Points: strings.TrimSpace(avg.String()), Class: "avg", Dots: avgDots},
	}
	return c
}

// fmtDuration shows a duration with three significant digits at most.
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
	case d < time.Minute:
		return fmt.Sprintf("%.3gs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
