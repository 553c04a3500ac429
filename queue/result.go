package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// resultKey finds a handler's result slot in its context.
type resultKey struct{}

// resultSlot holds the result a handler set, until its ack takes it.
type resultSlot struct{ b atomic.Pointer[[]byte] }

func (s *resultSlot) take() []byte {
	if s == nil {
		return nil
	}
	if p := s.b.Load(); p != nil {
		return *p
	}
	return nil
}

// SetResult records v, encoded as JSON, as the result of the job whose
// handler ctx is: when the handler returns nil, the result is stored with
// the job's ack (in the same transaction, on a store with
// driver.Results) and kept for the Worker's result retention
// (driver.DefaultResultRetention, 24 hours, unless Worker.ResultRetention
// says otherwise) after the job succeeded, however long the job itself is
// kept; a graph's node or a batch's member keeps it until its graph or
// batch has finished, and for the retention from then. Read it with ResultOf, from the dispatcher or from a later job (a
// chain's next step finds its predecessor in MetaChainAfter, a batch's
// callback its members through driver.Workflows.BatchMembers). A second
// call replaces the first; a failed attempt's result is dropped. It
// returns an error matching ErrInvalid for a value beyond
// driver.MaxResultBytes encoded (the same cap on every store), one
// matching ErrUnsupported outside a handler, and the encoder's error for a
// value that does not encode.
func SetResult(ctx context.Context, v any) error {
	s, _ := ctx.Value(resultKey{}).(*resultSlot)
	if s == nil {
		return fmt.Errorf("%w: queue.SetResult outside a handler's context", ErrUnsupported)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("queue: encoding a job's result: %w", err)
	}
	if len(b) > driver.MaxResultBytes {
		return fmt.Errorf("%w: %w: %d bytes", ErrInvalid, driver.ErrResultTooLarge, len(b))
	}
	s.b.Store(&b)
	return nil
}

// ResultOf reads the result that job id's handler set (SetResult) and
// decodes it into a T, waiting up to wait for the job to succeed (0: no
// wait). It returns an error matching ErrNoResult when there is none by
// then: the job has not succeeded, succeeded without a result, or its
// result's retention has passed; one matching ErrUnsupported on a store
// without driver.Results; ctx's error when ctx ends first; and one
// matching ErrDecode when the result does not decode into a T. It polls
// the store, first every 10ms, then less often, up to every second.
func ResultOf[T any](ctx context.Context, q Queue, id string, wait time.Duration) (T, error) {
	var v T
	rs := driver.CapabilitiesOf(q).Results
	if rs == nil {
		return v, fmt.Errorf("queue: reading job %s's result: %w: the store keeps no results", id, ErrUnsupported)
	}
	deadline := time.Now().Add(wait)
	pause := 10 * time.Millisecond
	for {
		b, err := rs.Result(ctx, id)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &v); err != nil {
				return v, fmt.Errorf("%w: job %s's result into %T: %v", ErrDecode, id, v, err)
			}
			return v, nil
		case !errors.Is(err, ErrNotFound):
			return v, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return v, fmt.Errorf("queue: job %s: %w within %s", id, ErrNoResult, wait)
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("queue: waiting for job %s's result: %w", id, context.Cause(ctx))
		case <-t.C:
		}
		pause = min(pause*2, time.Second)
	}
}

// ResultRetention sets how long a job's result (SetResult) is kept after
// the job succeeded: driver.DefaultResultRetention (24 hours) by default.
// It is independent of how long the store keeps finished jobs; d <= 0
// restores the default.
func (w *Worker) ResultRetention(d time.Duration) *Worker {
	if d <= 0 {
		d = driver.DefaultResultRetention
	}
	w.resultKeep = d
	return w
}
