package sqlqueue

import (
	"context"
	"reflect"

	"github.com/meridianjobs/meridian/queue"
)

// The store counts its jobs itself: on every dialect triggers on the jobs
// table keep the counts table as rows are inserted, change queue, state
// or scheduled bucket, or are deleted (the counts migrations; MySQL's
// 0018, SQLite's 0012), whoever writes them. No statement of this package
// counts anything, so a new write path cannot forget to.

// bind readies a template for the dialect: through sqlIn when an argument
// is a slice to expand, through the statement cache otherwise.
func (q *Queue) bind(tmpl string, args []any) (string, []any, error) {
	for _, a := range args {
		if _, bytes := a.([]byte); !bytes && reflect.ValueOf(a).Kind() == reflect.Slice {
			return q.sqlIn(tmpl, args...)
		}
	}
	return q.sql(tmpl), args, nil
}

// execJobs runs tmpl, an UPDATE or DELETE of jobs rows, on st with args
// (a slice among them expands an IN (?), as sqlIn does) and reports how
// many rows it changed.
func (q *Queue) execJobs(ctx context.Context, st statements, tmpl string, args ...any) (int64, error) {
	query, args, err := q.bind(tmpl, args)
	if err != nil {
		return 0, err
	}
	return st.Exec(ctx, query, args...)
}

// execLeased runs head (an UPDATE with its SET, or a DELETE, with no
// WHERE) on the job under lease l at now (micros), where leaseGuard holds:
// args are head's bind parameters.
func (q *Queue) execLeased(ctx context.Context, st statements, head string, l queue.Lease, now int64, args ...any) (int64, error) {
	return q.execJobs(ctx, st, head+" WHERE "+leaseGuard, append(append([]any(nil), args...), l.JobID, l.Token, now)...)
}
