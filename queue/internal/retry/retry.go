// Package retry is the worker's one backoff-and-retry helper: a capped
// exponential delay, a context-aware sleep, and Call, which repeats an
// operation while its error is classified as retryable.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential delay with equal jitter. The zero value is
// not useful; set Initial and Max. It is not safe for concurrent use: each
// loop keeps its own.
type Backoff struct {
	Initial time.Duration // the first delay
	Max     time.Duration // the cap
	// Jitter draws each delay from [d/2, d] instead of d, so that workers
	// that failed together do not retry together.
	Jitter bool

	cur time.Duration
}

// Next returns the delay before the next attempt and doubles the one after
// it, up to Max.
func (b *Backoff) Next() time.Duration {
	if b.cur <= 0 {
		b.cur = b.Initial
	}
	d := min(b.cur, b.Max)
	b.cur = min(b.cur*2, b.Max)
	if b.Jitter && d > 1 {
		half := d / 2
		d = half + rand.N(d-half+1)
	}
	return d
}

// Reset starts the next streak of failures from Initial again.
func (b *Backoff) Reset() { b.cur = 0 }

// Sleep waits for d or until ctx is done, and returns ctx's error in the
// second case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Call calls f until it returns nil or an error that retryable rejects,
// sleeping b.Next() between attempts, and returns f's last error. If ctx is
// done while it sleeps, Call returns f's last error (ctx's error when f had
// none to give). A nil retryable retries every error.
func Call(ctx context.Context, b Backoff, retryable func(error) bool, f func(ctx context.Context) error) error {
	for {
		err := f(ctx)
		if err == nil || (retryable != nil && !retryable(err)) {
			return err
		}
		if Sleep(ctx, b.Next()) != nil {
			return err
		}
	}
}
