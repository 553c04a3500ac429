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
	// pinned: the result of a node or batch member kept while its graph
	// or batch runs; until is then unset, and keep is how long it is kept
	// once the graph or batch finishes (releaseResultLocked).
	pinned bool
	keep   time.Duration
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
// passed. A result already past its time, or none, is not stored. With
// pin (a node of a graph, or a member of a batch, that was pending) it is
// kept until releaseResultLocked dates it, when its graph or batch
// finishes, for as long as res gives it from now.
func (q *Queue) keepResultLocked(id string, res kept, now time.Time, pin bool) {
	if res.b == nil || !res.until.After(now) {
		return
	}
	r := &q.results
	if r.m == nil {
		r.m = make(map[string]storedResult)
	}
	n := 0
	for n < len(r.order) && r.order[n].until.Before(now) {
		if s, ok := r.m[r.order[n].id]; ok && !s.pinned && !s.until.After(now) {
			delete(r.m, r.order[n].id)
		}
		n++
	}
	r.order = slices.Delete(r.order, 0, n)
	if pin {
		r.m[id] = storedResult{b: slices.Clone(res.b), pinned: true, keep: res.until.Sub(now)}
		return
	}
	r.m[id] = storedResult{b: slices.Clone(res.b), until: res.until}
	r.order = append(r.order, resultMark{id: id, until: res.until})
}

// releaseResultLocked dates job id's pinned result, if it has one: its
// graph or batch finished at now, and it is kept from now for its
// retention.
func (q *Queue) releaseResultLocked(id string, now time.Time) {
	s, ok := q.results.m[id]
	if !ok || !s.pinned {
		return
	}
	s.pinned, s.until = false, now.Add(s.keep)
	q.results.m[id] = s
	q.results.order = append(q.results.order, resultMark{id: id, until: s.until})
}

// repinResultLocked keeps job id's result, if it is still kept, until
// releaseResultLocked dates it again: its graph runs again (RetryGraph).
func (q *Queue) repinResultLocked(id string, now time.Time) {
	s, ok := q.results.m[id]
	if !ok || s.pinned || s.keep <= 0 || !s.until.After(now) {
		return
	}
	s.pinned = true
	q.results.m[id] = s
}

// Result returns the result stored for job id (see driver.Results).
func (q *Queue) Result(ctx context.Context, id string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reading job %s's result: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s, ok := q.results.m[id]
	if !ok || !s.pinned && !s.until.After(q.now()) {
		return nil, fmt.Errorf("memqueue: job %s's result: %w", id, driver.ErrNotFound)
	}
	return slices.Clone(s.b), nil
}
