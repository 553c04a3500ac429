package sqlqueue

import "context"

// CheckSchema checks, once per Queue, that its tables exist with this
// package's schema version, as every method does before its first
// statement, and returns the error that says what to run when they do not.
// Extras that write through their own client (the COPY loader of
// sqlqueue/postgres, fed by CopyRows) call it first.
func (q *Queue) CheckSchema(ctx context.Context) error { return q.use(ctx) }
