package driver

import (
	"context"
	"math"
	"math/bits"
	"time"
)

// RuntimeBuckets is the number of buckets of a RuntimeHistogram.
const RuntimeBuckets = 24

// MetricsRetention is how long a store with the MetricsHistory ability
// keeps its hourly points. Per-minute points (Inspector.Metrics) are kept
// at least the last hour; each store's doc says how long. Prometheus, fed
// by the observe package, is the place for anything longer.
const MetricsRetention = 7 * 24 * time.Hour

// RuntimeHistogram counts runtimes in fixed buckets on a log scale of base
// two, so that points of any store, minute or process add up bucket by
// bucket. Bucket 0 counts runtimes under 64µs; bucket i (1 to 22) those in
// [64µs·2^(i-1), 64µs·2^i); bucket 23 those of 2^28µs (about 4.5 minutes)
// and more.
//
// Percentiles read from it (Quantile) are within a factor of √2 of the
// true value (29% under to 41% over) for runtimes from 64µs to 268s: the
// estimate is the geometric middle of the bucket the percentile falls in,
// and never more than the point's MaxRuntime.
type RuntimeHistogram [RuntimeBuckets]int64

// RuntimeBucket returns the bucket of a RuntimeHistogram that counts d.
func RuntimeBucket(d time.Duration) int {
	us := d.Microseconds()
	if us < 64 {
		return 0
	}
	return min(bits.Len64(uint64(us))-6, RuntimeBuckets-1)
}

// Observe counts one runtime d.
func (h *RuntimeHistogram) Observe(d time.Duration) { h[RuntimeBucket(d)]++ }

// Merge adds o's counts to h.
func (h *RuntimeHistogram) Merge(o *RuntimeHistogram) {
	for i := range h {
		h[i] += o[i]
	}
}

// Count is the number of runtimes h counts.
func (h *RuntimeHistogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile estimates the q-quantile (0 < q <= 1: 0.5 for the median, 0.95
// for p95) of the runtimes h counts, the longest of which was maxRuntime
// (0 when unknown): the geometric middle of the bucket that holds the
// runtime of rank ⌈q·n⌉, 32µs for bucket 0, maxRuntime for the last
// bucket, and never more than maxRuntime when it is known. It returns 0
// for an empty histogram or a q out of range.
func (h *RuntimeHistogram) Quantile(q float64, maxRuntime time.Duration) time.Duration {
	n := h.Count()
	if n == 0 || !(q > 0 && q <= 1) {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range h {
		seen += c
		if seen < rank {
			continue
		}
		var d time.Duration
		switch {
		case i == 0:
			d = 32 * time.Microsecond
		case i == RuntimeBuckets-1 && maxRuntime > 0:
			return maxRuntime
		default:
			lo := float64(int64(64) << (i - 1))
			d = time.Duration(lo*math.Sqrt2) * time.Microsecond
		}
		if maxRuntime > 0 && d > maxRuntime {
			d = maxRuntime
		}
		return d
	}
	return 0
}

// MetricsHistory is a store that keeps hourly rollups of its run metrics
// for MetricsRetention, so that the dashboard's 24-hour and 7-day views
// read at most 24 or 168 points per queue and job name whatever the rate.
// The rollups are written with the per-minute points, in the same write.
type MetricsHistory interface {
	// HourlyMetrics returns one point per queue, job name and hour from
	// since (rounded down to its hour, at most MetricsRetention back) to
	// now, oldest first, then by queue and name. A point's Minute is the
	// start of its hour; hours without runs have no point.
	HourlyMetrics(ctx context.Context, since time.Time) ([]MetricPoint, error)
}
