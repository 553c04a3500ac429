package sqlqueue

import (
	"context"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// The store counts its jobs itself: on every dialect triggers on the jobs
// table keep the counts table as rows are inserted, change queue, state
// or scheduled bucket, or are deleted (the counts migrations; MySQL's
// 0018, SQLite's 0012), whoever writes them. No statement of this package
// counts anything, so a new write path cannot forget to.

// execIn runs the named statement, whose IN (?) takes a list (one slice
// among args: see stmtIn), on st and reports how many rows it changed.
func (q *Queue) execIn(ctx context.Context, st statements, stmt query, args ...any) (int64, error) {
	text, args, err := q.stmtIn(stmt, args...)
	if err != nil {
		return 0, err
	}
	return st.Exec(ctx, text, args...)
}

// execLeased runs stmt, a lease-guarded change of one job (see query),
// on the job under lease l at now (micros): args are its arguments before
// the lease's.
func (q *Queue) execLeased(ctx context.Context, st statements, stmt query, l queue.Lease, now int64, args ...any) (int64, error) {
	return st.Exec(ctx, q.stmt(stmt), append(args, l.JobID, l.Token, now)...)
}
