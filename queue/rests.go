package queue

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/meridianjobs/meridian/queue/internal/retry"
)

// rests keeps a queue whose reservation failed out of a worker's rounds
// for a backoff of its own while the worker's other queues answer, so one
// unreachable queue (on a Redis Cluster, a queue whose master died before
// its replica is promoted) does not stop a worker serving several. When
// every queue's last reservation failed, the failure is the worker's as
// before: its error goes back to the fetcher, which backs off as a whole,
// and nothing rests. It is not safe for concurrent use: the fetcher owns it.
type rests struct {
	queues []string
	wake   func()      // wakes the fetcher, called when a rest ends
	until  []time.Time // asked again from then on
	bo     []retry.Backoff
	fails  []streak

	ok     []bool  // whether the queue's last reservation worked (true before the first)
	failed []error // this round's failures, by queue; nil: answered or not asked
}

func newRests(log *slog.Logger, queues []string, poll time.Duration, wake func()) *rests {
	r := &rests{
		queues: queues,
		wake:   wake,
		until:  make([]time.Time, len(queues)),
		bo:     make([]retry.Backoff, len(queues)),
		fails:  make([]streak, len(queues)),
		ok:     make([]bool, len(queues)),
		failed: make([]error, len(queues)),
	}
	for i, qn := range queues {
		r.ok[i] = true
		r.bo[i] = retry.Backoff{Initial: 50 * time.Millisecond, Max: max(poll, 5*time.Second), Jitter: true}
		r.fails[i] = streak{log: log, doing: fmt.Sprintf("reserving jobs from queue %q while the worker's other queues answer", qn), level: slog.LevelWarn}
	}
	return r
}

// resting reports whether queue i is to be left out of the round at now.
func (r *rests) resting(i int, now time.Time) bool {
	return r != nil && now.Before(r.until[i])
}

// awake returns the queues not resting at now, for the fetcher to wait
// on: a resting queue's ready jobs must not wake a fetcher that will not
// ask it; none when every queue rests (the fetcher then waits for the
// poll, or the wake-up at the end of a rest).
func (r *rests) awake(now time.Time) []string {
	out := make([]string, 0, len(r.queues))
	for i, qn := range r.queues {
		if !r.resting(i, now) {
			out = append(out, qn)
		}
	}
	return out
}

// done records the answer of queue i in this round: err nil when it
// answered.
func (r *rests) done(i int, err error) {
	r.ok[i] = err == nil
	if err != nil {
		r.failed[i] = err
		return
	}
	r.bo[i].Reset()
	r.fails[i].ok()
}

// end closes the round at now and returns the error the fetcher is to
// handle: nil when some queue's last reservation worked (each queue that
// failed in the round then rests for its backoff), else the round's first
// failure. A configuration error is returned whatever else answered, so
// that it stops the run.
func (r *rests) end(now time.Time) error {
	answered := slices.Contains(r.ok, true)
	var first error
	for i, err := range r.failed {
		if err == nil {
			continue
		}
		r.failed[i] = nil
		if errors.Is(err, ErrConfig) {
			clear(r.failed)
			return err
		}
		if first == nil {
			first = err
		}
		if answered {
			d := r.bo[i].Next()
			r.until[i] = now.Add(d)
			// The fetcher may be waiting on the others' work alone: wake
			// it to ask this queue again.
			time.AfterFunc(d, r.wake)
			r.fails[i].failed(err, "queue", r.queues[i], "retry_in", d)
		}
	}
	if answered {
		return nil
	}
	return first
}
