package sqlqueue

import (
	"context"
	"strconv"
	"strings"
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

// pruneScheduledCounts deletes the bucket rows that folding left at zero
// (shard 0, which only the maintenance pass writes): every bucket a
// delayed job ever used would otherwise keep a row. A zero sum means no
// job is counted in the bucket, so no later write subtracts from it
// without adding first.
func (q *Queue) pruneScheduledCounts(ctx context.Context) error {
	_, err := q.db.ExecContext(ctx, q.stmt(qPruneScheduledCounts))
	return err
}
