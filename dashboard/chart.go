package dashboard

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/queue/driver"
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
	Title string
	Label string // the accessible description
	W, H  int
	Bars  []chartBar
	Lines []chartLine
	YMax  string // label of the top of the scale
	YMid  string // label of the gridline halfway up
	// Clipped says what a burst above the scale reached ("42,000/min"):
	// its minutes are drawn to the top, marked, and named in their titles.
	Clipped string
	Start   string // label of the left edge
	End     string // label of the right edge
	Legend  []chartLegend
	Empty   bool
	// EmptyText is said instead of the chart when it is Empty; "" for
	// "No runs in the last hour."
	EmptyText string
}

type chartBar struct {
	X, Y, W, H int
	Class      string
	Title      string
}

// burstRatio is how far the largest minute may exceed the ordinary busy
// minute (the 90th percentile of the minutes with any runs) before the
// scale stops following it: past that, the scale is set by the ordinary
// minutes and the burst is drawn clipped at the top, so one burst does
// not flatten the rest of the hour to a line.
const burstRatio = 4

// scaleTop picks the top of a chart's scale for the per-minute values vs
// (zeros are minutes without runs): a round number at or above the largest
// value, or, when a burst exceeds the ordinary busy minute burstRatio
// times over, a round number at or above twice that minute. clipped
// reports the second case.
func scaleTop(vs []int64) (top int64, clipped bool) {
	var nz []int64
	var hi int64
	for _, v := range vs {
		if v > 0 {
			nz = append(nz, v)
			hi = max(hi, v)
		}
	}
	if hi == 0 {
		return 0, false
	}
	if len(nz) >= 5 {
		slices.Sort(nz)
		p90 := nz[(len(nz)-1)*9/10]
		if hi > burstRatio*p90 {
			return roundUp(2 * p90), true
		}
	}
	return roundUp(hi), false
}

// roundUp returns the smallest of 1, 2, 2.5, 5 times a power of ten that is
// at least n (n > 0), so the scale and its halfway line read as round
// numbers.
func roundUp(n int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{10, 20, 25, 50} {
			if v := m * p / 10; v >= n && v > 0 {
				return v
			}
		}
		if p > math.MaxInt64/100 {
			return n
		}
	}
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
func bucket(points []driver.MetricPoint, queueName string, now time.Time) (start time.Time, mins [chartMinutes]minuteAgg) {
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
func throughputChart(points []driver.MetricPoint, queueName string, now time.Time) *chart {
	start, mins := bucket(points, queueName, now)
	vs := make([]int64, len(mins))
	var hi int64
	for i, m := range mins {
		vs[i] = m.processed + m.failed
		hi = max(hi, vs[i])
	}
	top, clipped := scaleTop(vs)
	c := &chart{
		Title: "Throughput", W: chartW, H: chartH,
		Label: "Jobs processed and failed per minute over the last hour",
		Start: "-60m", End: "now", YMax: display.Int(top) + "/min", YMid: display.Int(top/2) + "/min",
		Legend: []chartLegend{{"ok", "processed"}, {"bad", "failed"}},
		Empty:  top == 0,
	}
	if top == 0 {
		return c
	}
	if clipped {
		c.Clipped = display.Int(hi) + "/min"
	}
	for i, m := range mins {
		x := i * colW
		at := start.Add(time.Duration(i) * time.Minute).Format("15:04")
		scale := float64(top)
		over := vs[i] > top
		if over {
			// Drawn to the top, in proportion within the bar.
			scale = float64(vs[i])
		}
		okH := int(float64(m.processed) / scale * chartH)
		badH := int(float64(m.failed) / scale * chartH)
		note := ""
		cls := ""
		if over {
			note, cls = " (above the scale)", " clipped"
		}
		if m.processed > 0 {
			okH = max(okH, 1)
			c.Bars = append(c.Bars, chartBar{X: x, Y: chartH - okH, W: colW - 1, H: okH, Class: "ok" + cls,
				Title: at + ": " + display.Int(m.processed) + " processed" + note})
		}
		if m.failed > 0 {
			badH = max(badH, 1)
			c.Bars = append(c.Bars, chartBar{X: x, Y: max(chartH-okH-badH, 0), W: colW - 1, H: badH, Class: "bad" + cls,
				Title: at + ": " + display.Int(m.failed) + " failed" + note})
		}
	}
	return c
}

// runtimeChart draws the average and maximum runtime per minute as lines.
func runtimeChart(points []driver.MetricPoint, queueName string, now time.Time) *chart {
	start, mins := bucket(points, queueName, now)
	vs := make([]int64, len(mins))
	var hi time.Duration
	for i, m := range mins {
		vs[i] = int64(m.maxRun)
		hi = max(hi, m.maxRun)
	}
	t, clipped := scaleTop(vs)
	top := time.Duration(t)
	c := &chart{
		Title: "Runtime", W: chartW, H: chartH,
		Label: "Average and maximum job runtime per minute over the last hour",
		Start: "-60m", End: "now", YMax: fmtDuration(top), YMid: fmtDuration(top / 2),
		Legend: []chartLegend{{"avg", "average"}, {"max", "maximum"}},
		Empty:  top == 0,
	}
	if top == 0 {
		return c
	}
	if clipped {
		c.Clipped = fmtDuration(hi)
	}
	// y is the height of d on the scale; a value above it is drawn at the
	// top.
	y := func(d time.Duration) int {
		return chartH - int(float64(min(d, top))/float64(top)*chartH)
	}
	var avg, mx strings.Builder
	var avgDots, maxDots []chartDot
	for i, m := range mins {
		n := m.processed + m.failed
		if n == 0 {
			continue
		}
		x := i*colW + colW/2
		a, ym := y(m.runtime/time.Duration(n)), y(m.maxRun)
		fmt.Fprintf(&avg, "%d,%d ", x, a)
		fmt.Fprintf(&mx, "%d,%d ", x, ym)
		at := start.Add(time.Duration(i) * time.Minute).Format("15:04")
		note := ""
		if m.maxRun > top {
			note = " (above the scale)"
		}
		avgDots = append(avgDots, chartDot{x, a, fmt.Sprintf("%s: average %s", at, fmtDuration(m.runtime/time.Duration(n)))})
		maxDots = append(maxDots, chartDot{x, ym, fmt.Sprintf("%s: maximum %s%s", at, fmtDuration(m.maxRun), note)})
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
