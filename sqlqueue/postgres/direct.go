package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

// poolStatements runs sqlqueue's statements on the pool through pgx
// itself, not database/sql: the Queue's claim reads its rows this way
// (hook.Queue.Direct), scanning each column straight into its target
// where database/sql would first convert every column of every row into
// a driver.Value.
type poolStatements struct{ pool *pgxpool.Pool }

func (s poolStatements) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := s.pool.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (s poolStatements) Query(ctx context.Context, query string, args ...any) (hook.Rows, error) {
	return s.pool.Query(ctx, query, args...)
}
