package memqueue

import (
	"context"
	"fmt"
	"time"
)

// OldestReady returns, for each queue with ready jobs, the earliest
// AvailableAt among them (driver.Inspector). It reads the head of
// each priority's lane and the out-of-order heap, not every job.
func (q *Queue) OldestReady(ctx context.Context) (map[string]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reading oldest ready jobs: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	out := make(map[string]time.Time)
	for _, nq := range q.queues {
		nq.promote(now.UnixNano(), now)
		if nq.ready.len() == 0 {
			continue
		}
		oldest := int64(0)
		found := false
		consider := func(e *entry) {
			if !found || e.avail < oldest {
				oldest, found = e.avail, true
			}
		}
		for _, l := range nq.ready.lanes {
			if l.head < len(l.items) {
				consider(l.items[l.head])
			}
		}
		for _, e := range nq.ready.heap.items {
			consider(e)
		}
		if found {
			out[nq.name] = time.Unix(0, oldest)
		}
	}
	return out, nil
}
