package driver_test

import (
	"math"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

func TestRuntimeBucket(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{63 * time.Microsecond, 0},
		{64 * time.Microsecond, 1},
		{127 * time.Microsecond, 1},
		{128 * time.Microsecond, 2},
		{time.Millisecond, 4}, // [512µs, 1024µs)
		{time.Second, 14},     // [524ms, 1.05s)
		{(1 << 28) * time.Microsecond, driver.RuntimeBuckets - 1},
		{time.Hour, driver.RuntimeBuckets - 1},
		{-time.Second, 0},
	} {
		if got := driver.RuntimeBucket(c.d); got != c.want {
			t.Errorf("RuntimeBucket(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestQuantilePrecision checks the stated precision: from 64µs to 268s a
// quantile read from the buckets is within a factor of √2 of the true one.
func TestQuantilePrecision(t *testing.T) {
	t.Parallel()
	for d := 64 * time.Microsecond; d < 268*time.Second; d = d * 23 / 17 {
		var h driver.RuntimeHistogram
		for range 10 {
			h.Observe(d)
		}
		h.Observe(d * 1000) // an outlier beyond the p50 and p95
		for _, q := range []float64{0.5, 0.9} {
			got := h.Quantile(q, 0)
			if r := float64(got) / float64(d); r < 1/math.Sqrt2-1e-9 || r > math.Sqrt2+1e-9 {
				t.Errorf("Quantile(%v) of ten runs of %v = %v, a factor %.3f off", q, d, got, r)
			}
		}
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	var h driver.RuntimeHistogram
	if got := h.Quantile(0.5, time.Second); got != 0 {
		t.Errorf("Quantile of an empty histogram = %v, want 0", got)
	}
	for _, d := range []time.Duration{10 * time.Microsecond, 3 * time.Millisecond, 3 * time.Millisecond, time.Hour} {
		h.Observe(d)
	}
	for _, c := range []struct {
		q    float64
		max  time.Duration
		want time.Duration
	}{
		{0.25, 0, 32 * time.Microsecond},                        // bucket 0
		{0.5, 0, 2896 * time.Microsecond},                       // [2048µs, 4096µs)
		{0.5, 2500 * time.Microsecond, 2500 * time.Microsecond}, // capped at the max
		{1, time.Hour, time.Hour},                               // the last bucket is the max
		{0, time.Hour, 0},                                       // out of range
		{1.5, time.Hour, 0},                                     // out of range
	} {
		if got := h.Quantile(c.q, c.max); got != c.want {
			t.Errorf("Quantile(%v, %v) = %v, want %v", c.q, c.max, got, c.want)
		}
	}
	var sum driver.RuntimeHistogram
	sum.Merge(&h)
	sum.Merge(&h)
	if sum.Count() != 8 || sum[driver.RuntimeBucket(3*time.Millisecond)] != 4 {
		t.Errorf("two merges of %v = %v, want each bucket doubled", h, sum)
	}
}
