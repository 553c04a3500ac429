package sqlqueue

import (
	"context"
	"strconv"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// DeadSince counts the dead letters of every queue dead-lettered at or
// after since (queue.RecentDeadCounter): finished_at, which the statement
// that dead-letters a job sets, on the (state, finished_at) index. It
// counts the older dead letters up to 10,000 and subtracts them from the
// exact total of the counts table; when more than that are older, it
// counts the recent ones up to 10,000 (Count.More past that). Either way
// it reads at most 10,001 index entries, and the usual case (dead letters
// kept about a week, as the retention of WithRetention does) costs one
// probe.
func (q *Queue) DeadSince(ctx context.Context, since time.Time) (queue.Count, error) {
	if err := q.use(ctx); err != nil {
		return queue.Count{}, err
	}
	var out queue.Count
	err := q.inspectRead(ctx, 0, false, func(st statements) error {
		var total, older int64
		if err := queryRow(ctx, st, q.sql("SELECT COALESCE(SUM(n), 0) FROM {counts} WHERE state = 'dead'"), nil, &total); err != nil {
			return err
		}
		lim := " LIMIT " + strconv.Itoa(countCap+1) + ") b"
		if err := queryRow(ctx, st, q.sql("SELECT COUNT(*) FROM (SELECT 1 AS x FROM {jobs} WHERE state = 'dead' AND finished_at < ?"+lim), []any{micros(since)}, &older); err != nil {
			return err
		}
		if older <= countCap {
			out = queue.Count{N: max(total-older, 0)}
			return nil
		}
		var recent int64
		if err := queryRow(ctx, st, q.sql("SELECT COUNT(*) FROM (SELECT 1 AS x FROM {jobs} WHERE state = 'dead' AND finished_at >= ?"+lim), []any{micros(since)}, &recent); err != nil {
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

var _ queue.RecentDeadCounter = (*Queue)(nil)
