package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

func TestScaleTop(t *testing.T) {
	steady := func(v int64, n int) []int64 {
		vs := make([]int64, n)
		for i := range vs {
			vs[i] = v
		}
		return vs
	}
	tests := []struct {
		name    string
		vs      []int64
		top     int64
		clipped bool
	}{
		{"nothing ran", steady(0, 60), 0, false},
		{"steady: a round number above the peak", steady(87, 60), 100, false},
		{"a mild peak is followed", append(steady(100, 59), 350), 500, false},
		{"a burst is clipped at twice the ordinary minute", append(steady(100, 59), 50000), 200, true},
		{"too few minutes to tell a burst", []int64{1, 1, 1, 1000}, 1000, false},
		{"round numbers", []int64{2400}, 2500, false},
		{"one", []int64{1}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top, clipped := scaleTop(tt.vs)
			if top != tt.top || clipped != tt.clipped {
				t.Errorf("scaleTop = %d, %v; want %d, %v", top, clipped, tt.top, tt.clipped)
			}
		})
	}
}

// A burst minute is drawn clipped and says its value; the ordinary
// minutes keep a readable height.
func TestThroughputChartBurst(t *testing.T) {
	now := time.Date(2026, 1, 2, 10, 30, 0, 0, time.UTC)
	var pts []driver.MetricPoint
	for i := range 60 {
		p := driver.MetricPoint{Queue: "q", Minute: now.Add(-time.Duration(i) * time.Minute).Truncate(time.Minute), Processed: 100}
		if i == 10 {
			p.Processed = 48000
			p.Failed = 2000
		}
		pts = append(pts, p)
	}
	c := throughputChart(pts, "", now)
	if c.Clipped != "50,000/min" || c.YMax != "200/min" || c.YMid != "100/min" {
		t.Fatalf("chart scale %q, mid %q, clipped %q; want 200/min, 100/min, 50,000/min", c.YMax, c.YMid, c.Clipped)
	}
	var clipped int
	for _, b := range c.Bars {
		if strings.Contains(b.Class, "clipped") {
			clipped++
			if !strings.Contains(b.Title, "above the scale") {
				t.Errorf("clipped bar title %q does not say so", b.Title)
			}
			continue
		}
		if b.H < chartH/3 {
			t.Errorf("ordinary minute drawn %d px high of %d: flattened by the burst", b.H, chartH)
		}
	}
	if clipped != 2 {
		t.Errorf("%d clipped bars, want 2 (processed and failed of the burst minute)", clipped)
	}
}
