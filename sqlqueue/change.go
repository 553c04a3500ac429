package sqlqueue

import (
	"context"
	"reflect"
	"strconv"
	"strings"

	"github.com/meridianjobs/meridian/queue"
)

// jobChange is one UPDATE or DELETE of rows of the jobs table, split so
// that a dialect can find the rows it will change before it changes them:
// head is "UPDATE {jobs} SET ..." or "DELETE FROM {jobs}" (with no WHERE
// of its own) and headArgs its bind parameters; where finds the rows and
// whereArgs are its parameters. A slice among whereArgs expands an IN (?)
// of where, as sqlIn does.
type jobChange struct {
	head, where         string
	headArgs, whereArgs []any
	// leased: where is leaseGuard, so the one row it finds is pending
	// and in no scheduled bucket (a claim takes a job once due and moves
	// updated_at past its run_at; an extension or a start mark only moves
	// updated_at on; every statement that moves run_at later ends the
	// lease).
	leased bool
}

// deletes reports whether c deletes its rows rather than updating them.
func (c jobChange) deletes() bool { return strings.HasPrefix(c.head, "DELETE") }

// statement returns c whole ("head WHERE where"), with its arguments
// (head's first), ready for st.Exec.
func (q *Queue) statement(c jobChange) (string, []any, error) {
	return q.bind(c.head+" WHERE "+c.where, append(append([]any(nil), c.headArgs...), c.whereArgs...))
}

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

// changeJobs runs "head WHERE where" (see jobChange) on st, with args:
// head's bind parameters first (as many as head has ? marks), then
// where's. It reports how many rows the statement changed. Every UPDATE
// and DELETE of jobs goes through it, bar the claim, the batch ack and a
// lease's extension (which count what they change themselves, or change
// nothing counted), so that a dialect whose triggers do not count the
// rows a statement changes (MySQL) counts them here, in the same
// transaction.
func (q *Queue) changeJobs(ctx context.Context, st statements, head, where string, args ...any) (int64, error) {
	k := strings.Count(head, "?")
	return q.d.changeJobs(ctx, q, st, jobChange{head: head, where: where, headArgs: args[:k:k], whereArgs: args[k:]})
}

// changeLeased is changeJobs for the job under lease l at now (micros),
// with head and args as changeJobs takes them: the condition is
// leaseGuard.
func (q *Queue) changeLeased(ctx context.Context, st statements, head string, l queue.Lease, now int64, args ...any) (int64, error) {
	k := strings.Count(head, "?")
	return q.d.changeJobs(ctx, q, st, jobChange{head: head, where: leaseGuard, headArgs: args[:k:k], whereArgs: []any{l.JobID, l.Token, now}, leased: true})
}

// triggerCounts is the changeJobs of a dialect whose triggers count every
// row a statement changes (PostgreSQL, SQLite): the statement alone.
type triggerCounts struct{}

func (triggerCounts) changeJobs(ctx context.Context, q *Queue, st statements, c jobChange) (int64, error) {
	query, args, err := q.statement(c)
	if err != nil {
		return 0, err
	}
	return st.Exec(ctx, query, args...)
}

// countedRow is what the counts table counts of a job's row: its queue
// and state, and, for a pending job written to run later (run_at after
// updated_at), the scheduled bucket of its run_at (see migration
// scheduled of each dialect).
type countedRow struct {
	queue, state     string
	runAt, updatedAt int64
}

// countRow adds sign (1 or -1) times r to deltas, as the counting
// triggers of the other dialects do for a row inserted (1) or deleted
// (-1); an update is the old row deleted and the new one inserted.
func countRow(deltas map[countKey]int64, r countedRow, sign int64) {
	deltas[countKey{r.queue, r.state}] += sign
	if r.state == statePending && r.runAt > r.updatedAt {
		deltas[countKey{r.queue, schedPrefix + strconv.FormatInt(r.runAt/schedBucket, 10)}] += sign
	}
}

// onPool reports whether st runs each statement on the pool (its own
// implicit transaction) rather than in a transaction.
func onPool(st statements) bool {
	s, ok := st.(sqlStatements)
	if !ok {
		return false
	}
	_, pool := s.ex.(DB)
	return pool
}

// ownTx runs fn on st, or, when st is the pool (onPool), in a write
// transaction of its own: for statements that must commit together, as
// a push and the count of what it inserted.
func (q *Queue) ownTx(ctx context.Context, st statements, fn func(st statements) error) error {
	if !onPool(st) {
		return fn(st)
	}
	return q.d.writeTx(ctx, q, func(tx execer) error { return fn(stmts(tx)) })
}
