package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

// TxPusher pushes jobs inside the caller's pgx transaction: they become
// visible to workers, and the wake-up notification is delivered, if and
// only if the caller commits (pg_notify is transactional). It is a
// queue.Pusher and a queue.BatchPusher, so Dispatch, Enqueue and
// DispatchMany work with it. It is valid while the transaction is open
// and, like the transaction, must not be used by several goroutines at
// once.
//
// It runs sqlqueue's own push statements (the multi-row INSERT ... ON
// CONFLICT DO NOTHING, dead-letter revival and pg_notify of
// (*sqlqueue.Queue).Tx) on the transaction, so a duplicate is reported as
// queue.ErrDuplicate without aborting the transaction.
type TxPusher struct {
	p hook.TxPusher
}

var (
	_ queue.Pusher          = (*TxPusher)(nil)
	_ queue.BatchPusher     = (*TxPusher)(nil)
	_ queue.BatchDispatcher = (*TxPusher)(nil)
)

// Tx returns a Pusher bound to the caller's pgx transaction tx (from a
// pgx.Conn or a pgxpool.Pool of the same database):
//
//	tx, err := pool.Begin(ctx)
//	...
//	err = queue.Dispatch(ctx, q.Tx(tx), SendWelcome{UserID: id})
//	...
//	err = tx.Commit(ctx)
//
// For a *sql.Tx use the embedded sqlqueue.Queue's Tx: q.Queue.Tx(sqlTx).
func (q *Queue) Tx(tx pgx.Tx) *TxPusher {
	return &TxPusher{p: hook.Of(q.Queue).Tx(txStatements{tx})}
}

// Push stores j in the transaction with Queue.Push's rules.
func (p *TxPusher) Push(ctx context.Context, j queue.Job) error { return p.p.Push(ctx, j) }

// PushMany stores jobs in the transaction with Queue.PushMany's rules, as
// multi-row INSERTs (never COPY, whose failure would abort the caller's
// transaction).
func (p *TxPusher) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	return p.p.PushMany(ctx, jobs)
}

// PushBatch stores a batch's record and its members in the transaction
// with the Batcher's rules (see queue.DispatchBatch): both become visible
// when the caller commits, and neither if it rolls back.
func (p *TxPusher) PushBatch(ctx context.Context, rec queue.BatchRecord, jobs []queue.Job) (int, error) {
	return p.p.PushBatch(ctx, rec, jobs)
}

// PushGraph stores a graph's record and its nodes in the transaction with
// the Graphs rules (see dag.Dispatch): the graph becomes visible when the
// caller commits, and nothing of it if it rolls back.
func (p *TxPusher) PushGraph(ctx context.Context, rec queue.GraphRecord, nodes []queue.GraphNode) error {
	return p.p.PushGraph(ctx, rec, nodes)
}

// txStatements runs sqlqueue's statements on a pgx.Tx.
type txStatements struct{ tx pgx.Tx }

var errNoTx = errors.New("sqlqueue/postgres: Tx needs a transaction, not nil")

func (s txStatements) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if s.tx == nil {
		return 0, errNoTx
	}
	tag, err := s.tx.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (s txStatements) Query(ctx context.Context, query string, args ...any) (hook.Rows, error) {
	if s.tx == nil {
		return nil, errNoTx
	}
	return s.tx.Query(ctx, query, args...)
}
