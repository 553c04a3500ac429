package sqlqueue

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// OldestReady returns, for each queue with ready jobs, the earliest time
// one of them became available (queue.OldestReadyReader). Per queue it
// reads the head of each priority's ready range on the claim index (queue,
// priority, run_at, seq), so its cost follows the number of queues and
// priorities, not of jobs; on PostgreSQL, where a running job keeps its
// run_at, the read also steps over the queue's running jobs at that head.
// A queue with more than 32 priorities is read by one MIN over its ready
// jobs. The reads of up to oldestChunk queues are one statement. At most
// 1,000 queues are read, as by QueueStats.
func (q *Queue) OldestReady(ctx context.Context) (map[string]time.Time, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	now := micros(time.Now())
	out := make(map[string]time.Time)
	err := q.inspectRead(ctx, 0, false, func(st statements) error {
		names, err := q.knownQueues(ctx, st, statePending)
		if err != nil {
			return fmt.Errorf("listing queues: %w", err)
		}
		prios, err := q.priorities(ctx, st, names...)
		if err != nil {
			return fmt.Errorf("reading the queues' priorities: %w", err)
		}
		for chunk := range slices.Chunk(names, oldestChunk) {
			query, args := q.oldestQuery(chunk, prios, now)
			rows, err := st.Query(ctx, query, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var name string
				var at sql.NullInt64
				if err := rows.Scan(&name, &at); err != nil {
					rows.Close()
					return err
				}
				if at.Valid {
					out[name] = fromMicros(at.Int64)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, q.wrap(ctx, err, "reading the oldest ready jobs")
	}
	return out, nil
}

// oldestChunk is how many queues one statement of OldestReady reads.
const oldestChunk = 64
