// Package hook is the plumbing between sqlqueue and its registration
// subpackages (sqlqueue/postgres, sqlqueue/mysql, sqlqueue/sqlite): what
// they need of a *sqlqueue.Queue beyond the methods users call, kept out
// of sqlqueue's public API.
//
// sqlqueue sets Of in its init; sqlqueue cannot be imported here (it
// imports this package), so Of takes the *sqlqueue.Queue as any.
package hook

import (
	"context"
	"log/slog"
	"strings"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Statements runs SQL for a transactional push on a transaction that
// database/sql does not own, such as a pgx.Tx. Queries come with the
// dialect's placeholders ($1 on PostgreSQL) and take string, []byte, int,
// int64 and nil arguments.
type Statements interface {
	// Exec runs a statement and reports how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	// Query runs a query. pgx.Rows satisfies Rows.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Rows is the result of Statements.Query.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// TxPusher pushes inside a caller's transaction (a *sqlqueue.TxPusher).
type TxPusher interface {
	queue.Pusher
	queue.BatchPusher
	queue.BatchDispatcher
	queue.GraphDispatcher
}

// Queue is what the registration subpackages use of a *sqlqueue.Queue
// beyond its exported methods.
type Queue interface {
	// CheckSchema checks, once per Queue, that its tables exist with the
	// package's schema version, as every method does before its first
	// statement. Extras that write through their own client (COPY) call
	// it first.
	CheckSchema(ctx context.Context) error
	// CopyRows returns what a bulk loader such as COPY needs to store jobs
	// as new pending jobs: the jobs table's unquoted name, its columns,
	// and one row of values per job, with Push's defaults applied. A bulk
	// load has no ON CONFLICT: use it only for jobs without unique keys
	// and with new IDs. It sends no notification: call Announce after the
	// load commits.
	CopyRows(jobs []queue.Job) (table string, columns []string, rows [][]any)
	// Announce sends, after the fact, the notification of jobs stored by
	// a bulk load that has committed, coalesced with other pushes'.
	Announce(jobs []queue.Job)
	// Tx returns a pusher bound to a transaction run through s.
	Tx(s Statements) TxPusher
	// Own makes the Queue's Close also call closeDB: the Queue owns the
	// database it was opened on.
	Own(closeDB func() error)
	// Logger is the Queue's logger (sqlqueue.WithLogger).
	Logger() *slog.Logger
	// Direct gives the Queue statements on its own database through the
	// driver's client (pgx without database/sql), for the reads whose
	// per-column conversions through database/sql cost most (the
	// PostgreSQL claim). Call it before the Queue is used.
	Direct(s Statements)
	// Local makes the Queue hand the queues of every push it announces,
	// with how many jobs it stored in each (jobs[i] for queues[i]), to
	// wake at once, in this process, before its notification goes out;
	// the notification then carries origin (see LocalPayload), so that
	// the listener that woke locally skips it, and notifications are sent
	// at most once per gap, coalesced, for the other processes. Call it
	// before the Queue is used.
	Local(origin string, gap time.Duration, wake func(queues []string, jobs []int))
}

// ParsePayload reads a notification payload of a Queue's NotifyChannel:
// the queues named (all true: every queue) and the origin that sent it
// when the sender marked it (see Queue.Local; "" otherwise). A marked
// payload begins with an empty line, then the origin: an empty queue name
// is never stored, so no unmarked payload begins so, and a listener that
// does not know the mark wakes nothing more than the named queues.
func ParsePayload(payload string) (queues []string, all bool, origin string) {
	if payload == "" {
		return nil, true, ""
	}
	if rest, ok := strings.CutPrefix(payload, "\n"); ok {
		origin, rest, _ = strings.Cut(rest, "\n")
		if rest == "" {
			return nil, true, origin
		}
		return strings.Split(rest, "\n"), false, origin
	}
	return strings.Split(payload, "\n"), false, ""
}

// MarkPayload is the payload naming queues (joined) sent by origin: see
// ParsePayload.
func MarkPayload(origin, queues string) string {
	if origin == "" {
		return queues
	}
	return "\n" + origin + "\n" + queues
}

// Of returns the hooks of q, a *sqlqueue.Queue. Set by sqlqueue.
var Of func(q any) Queue

// Setupper is a queue that can create its tables and be closed.
type Setupper interface {
	Setup(ctx context.Context) error
	Close() error
}

// OpenOwned makes a queue that owns its database: newQ makes it (closeDB
// is called if it fails), own hands closeDB to it so that its Close
// releases the database, and with setup it runs Setup (closing the queue
// if that fails). Every registration subpackage opens its queues so.
func OpenOwned[Q Setupper](ctx context.Context, setup bool, closeDB func() error, newQ func() (Q, error), own func(Q)) (Q, error) {
	q, err := newQ()
	if err != nil {
		_ = closeDB()
		var zero Q
		return zero, err
	}
	own(q)
	if setup {
		if err := q.Setup(ctx); err != nil {
			_ = q.Close()
			var zero Q
			return zero, err
		}
	}
	return q, nil
}
