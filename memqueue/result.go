package memqueue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// results holds job results (driver.Results) by job ID, apart from the
// jobs, with the order they were stored in so that the expired ones are
// pruned as new ones come.
type results struct {
	m     map[string]storedResult
	order []resultMark
}

type storedResult struct {
	b     []byte
	until time.Time
}

type resultMark struct {
	id    string
	until time.Time
}

// kept is a done outcome's result to keep (Completion.Result and
// ResultUntil); its zero value keeps none.
type kept struct {
	b     []byte
	until time.Time
}

// resultOf is o's result to keep.
func resultOf(o driver.Completion) kept { return kept{b: o.Result, until: o.ResultUntil} }

// keepResultLocked stores res as job id's result, in the critical section
// of the job's ack, pruning the results stored before it whose time has
// passed. A result already past its time, or none, is not stored.
func (q *Queue) keepResultLocked(id string, res kept, now time.Time) {
	if res.b == nil || !res.until.After(now) {
		return
	}
	r := &q.results
	if r.m == nil {
		r.m = make(map[string]storedResult)
	}
	n := 0
	for n < len(r.order) && r.order[n].until.Before(now) {
		if s, ok := r.m[r.order[n].id]; ok && !s.until.After(now) {
			delete(r.m, r.order[n].id)
		}
		n++
	}
	r.order = slices.Delete(r.order, 0, n)
	r.m[id] = storedResult{b: slices.Clone(res.b), until: res.until}
	r.order = append(r.order, resultMark{id: id, until: res.until})
}

// Result returns the result stored for job id (see driver.Results).
func (q *Queue) Result(ctx context.Context, id string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reading job %s's result: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s, ok := q.results.m[id]
	if !ok || !s.until.After(q.now()) {
		return nil, fmt.Errorf("memqueue: job %s's result: %w", id, driver.ErrNotFound)
	}
	return slices.Clone(s.b), nil
}
