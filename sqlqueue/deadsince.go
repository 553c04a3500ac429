package sqlqueue

import (
	"context"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// DeadSince counts the dead letters of every queue dead-lettered at or
// after since (queue.RecentDeadCounter): finished_at, which the statement
// that dead-letters a job sets, on the list index (state, queue,
// finished_at, seq), one range per queue with dead letters (see
// countFinished). It counts the older dead letters up to 10,000 and
// subtracts them from the exact total of the counts table; when more than
// that are older, it counts the recent ones up to 10,000 (Count.More past
// that). Either way it reads at most 10,001 index entries, and the usual
// case (dead letters kept about a week, as the retention of WithRetention
// does, and fewer than 10,000 of them) costs one statement of one probe
// per queue.
func (q *Queue) DeadSince(ctx context.Context, since time.Time) (queue.Count, error) {
	if err := q.use(ctx); err != nil {
		return queue.Count{}, err
	}
	var out queue.Count
	err := q.inspectRead(ctx, 0, false, func(st statements) error {
		names, totals, err := q.finishedQueues(ctx, st, stateDead)
		if err != nil {
			return err
		}
		var total int64
		for _, n := range totals {
			total += n
		}
		older, err := q.countFinished(ctx, st, stateDead, "<", micros(since), names, totals)
		if err != nil {
			return err
		}
		if older <= countCap {
			out = queue.Count{N: max(total-older, 0)}
			return nil
		}
		recent, err := q.countFinished(ctx, st, stateDead, ">=", micros(since), names, totals)
		if err != nil {
			return err
		}
		out = capped(recent)
		return nil
	})
	if err != nil {
		return queue.Count{}, q.wrap(ctx, err, "counting the dead letters since %s", since.Format(time.RFC3339))
	}
	return out, nil
}

var _ queue.Inspector = (*Queue)(nil)
