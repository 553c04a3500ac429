package memqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// DeadSince counts the dead letters of every queue dead-lettered at or
// after since (driver.Inspector). The count is exact.
func (q *Queue) DeadSince(ctx context.Context, since time.Time) (driver.Count, error) {
	if err := ctx.Err(); err != nil {
		return driver.Count{}, fmt.Errorf("memqueue: counting recent dead letters: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var n int64
	for _, nq := range q.queues {
		for _, e := range nq.dead {
			if !e.finishedAt().Before(since) {
				n++
			}
		}
	}
	return driver.Count{N: n}, nil
}

var _ driver.Inspector = (*Queue)(nil)
