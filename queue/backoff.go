package queue

import (
	"math/rand/v2"
	"time"
)

// BackoffPolicy decides how long the worker waits before retrying a job
// whose attempt failed. attempt is the number of attempts made so far (1
// after the first failure). Implementations must be safe for concurrent use.
//
// A job type that implements it on its zero value sets its own backoff,
// overriding the worker's (Worker.Backoff) for its jobs.
type BackoffPolicy interface {
	Backoff(attempt int) time.Duration
}

// BackoffFunc adapts a function to BackoffPolicy.
type BackoffFunc func(attempt int) time.Duration

// Backoff calls f.
func (f BackoffFunc) Backoff(attempt int) time.Duration { return f(attempt) }

// Fixed waits d before every retry.
func Fixed(d time.Duration) BackoffPolicy {
	return BackoffFunc(func(int) time.Duration { return d })
}

// Delays waits ds[0] before the first retry, ds[1] before the second and so
// on; the last delay repeats (Laravel's backoff: [1, 5, 10]). No delays
// means no wait.
func Delays(ds ...time.Duration) BackoffPolicy {
	ds = append([]time.Duration(nil), ds...)
	return BackoffFunc(func(attempt int) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		i := min(max(attempt-1, 0), len(ds)-1)
		return ds[i]
	})
}

// Exponential waits base, 2*base, 4*base ... capped at limit, with equal
// jitter: the wait is drawn uniformly from [d/2, d], so workers that failed
// together do not retry together.
func Exponential(base, limit time.Duration) BackoffPolicy {
	return BackoffFunc(func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < limit; i++ {
			d *= 2
		}
		d = min(d, limit)
		if d <= 1 {
			return d
		}
		half := d / 2
		return half + rand.N(d-half+1)
	})
}
