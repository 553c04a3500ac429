package queue

import (
	"context"
	"log/slog"
	"time"
)

// streak logs a repeating failure of one operation once per streak: at the
// first failure, then once when the operation works again, with how many
// attempts failed in between. It is not safe for concurrent use: each loop
// keeps its own.
type streak struct {
	log   *slog.Logger
	doing string // what failed, as in "reserving jobs"
	level slog.Level

	failures int
	since    time.Time
}

// failed records a failure; only the first of a streak is logged.
func (s *streak) failed(err error, args ...any) {
	s.failures++
	if s.failures > 1 {
		return
	}
	s.since = time.Now()
	s.log.Log(context.Background(), s.level, "queue: "+s.doing+" failed; retrying with backoff until it recovers",
		append([]any{"err", err}, args...)...)
}

// ok records a success, logging the end of a streak if one was running.
func (s *streak) ok() {
	if s.failures == 0 {
		return
	}
	s.log.Info("queue: "+s.doing+" recovered", "failures", s.failures, "after", time.Since(s.since))
	s.failures = 0
}
