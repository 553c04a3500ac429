package sqlqueue

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// schedBucket is the width, in microseconds of run_at, of the buckets in
// which the database counts the jobs written to run later (five minutes;
// the scheduled migration of each dialect divides run_at by the same
// number). Counts reads the buckets after the current one and counts the
// jobs of the current one on the claim index, so the scheduled count costs
// one row per queue and bucket plus the jobs due within schedBucket.
const schedBucket = 300_000_000

// schedPrefix starts the state under which the counts table holds a
// bucket: "at:" and run_at / schedBucket.
const schedPrefix = "at:"

// readScheduled returns, per queue, how many pending jobs the counts table
// holds in the buckets that begin after now: jobs that were written to run
// later and run after the current bucket ends. Rows of buckets that have
// passed are read and skipped (they are never needed: see the scheduled
// migration).
func (q *Queue) readScheduled(ctx context.Context, st statements, now int64) (map[string]int64, error) {
	rows, err := st.Query(ctx, q.stmt(qScheduledCounts))
	if err != nil {
		return nil, q.wrap(ctx, err, "reading the scheduled job counts")
	}
	defer rows.Close()
	out := map[string]int64{}
	current := now / schedBucket
	for rows.Next() {
		var name, state string
		var n int64
		if err := rows.Scan(&name, &state, &n); err != nil {
			return nil, q.wrap(ctx, err, "reading the scheduled job counts")
		}
		b, err := strconv.ParseInt(strings.TrimPrefix(state, schedPrefix), 10, 64)
		if err == nil && b > current {
			out[name] += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, q.wrap(ctx, err, "reading the scheduled job counts")
	}
	return out, nil
}

// schedBucketEnd is the first run_at after the bucket now is in: the
// jobs scheduled before it are counted on the claim index, the others
// read from the buckets.
func schedBucketEnd(now int64) int64 { return (now/schedBucket + 1) * schedBucket }

// schedPastKeep is how many buckets before the current one keep their
// rows: older ones are dropped whatever they hold (see
// pruneScheduledCounts). An hour, so that a process whose clock runs
// behind the pruning one's by less still finds the buckets it reads.
const schedPastKeep = 12

// pruneScheduledCounts deletes the bucket rows that Counts no longer
// needs: those of shard 0 (which only the maintenance pass writes) that
// folding left at zero, and every row of a bucket more than
// schedPastKeep buckets past. A bucket that has passed is never read
// again, and may hold jobs that left it uncounted (a PostgreSQL claim
// skips the counting trigger, see pgUncounted); a write that later
// subtracts from it writes a row that the next pass drops. Without it,
// every bucket a delayed job ever used would keep a row.
func (q *Queue) pruneScheduledCounts(ctx context.Context, now time.Time) error {
	_, err := q.db.ExecContext(ctx, q.stmt(qPruneScheduledCounts), micros(now)/schedBucket-schedPastKeep)
	return err
}
