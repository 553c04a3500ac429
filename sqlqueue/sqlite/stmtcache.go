package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"

	"modernc.org/sqlite"
)

// The statement cache: modernc.org/sqlite prepares every statement that
// database/sql runs without an *sql.Stmt anew, and SQLite's parser and
// code generator are a large part of sqlqueue's cost there, for a batch
// push and a single push alike.
// sqlqueue runs a small set of statement texts over and over, so each
// connection keeps the ones it has run twice prepared, and runs them again
// with new arguments.
const (
	// cachedStmts is how many prepared statements a connection keeps.
	cachedStmts = 48
	// seenTexts bounds the record of texts run once (admission on the
	// second run keeps one-off texts, such as the claim UPDATE of an
	// unusual batch size, from evicting the hot ones).
	seenTexts = 512
)

// connector opens modernc.org/sqlite connections that cache statements,
// running pragmas (if any) on each new one.
type connector struct {
	dsn     string
	drv     *sqlite.Driver
	pragmas string
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	if ex, ok := dc.(driver.ExecerContext); ok && c.pragmas != "" {
		if _, err := ex.ExecContext(ctx, c.pragmas, nil); err != nil {
			_ = dc.Close()
			return nil, err
		}
	}
	return newCachingConn(dc)
}

func (c *connector) Driver() driver.Driver { return c.drv }

// innerConn is what cachingConn needs of a modernc.org/sqlite connection.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is a modernc.org/sqlite connection whose ExecContext and
// QueryContext reuse prepared statements. database/sql uses a connection
// from one goroutine at a time; a cached statement whose rows are still
// open is not reused until they are closed (the call runs uncached).
type cachingConn struct {
	innerConn
	stmts map[string]*cachedStmt
	seen  map[string]struct{}
	clock uint64
}

type cachedStmt struct {
	stmt interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}
	busy bool
	used uint64
}

func newCachingConn(dc driver.Conn) (driver.Conn, error) {
	ic, ok := dc.(innerConn)
	if !ok {
		_ = dc.Close()
		return nil, errors.New("sqlqueue/sqlite: the sqlite driver's connection lacks the context methods")
	}
	return &cachingConn{innerConn: ic, stmts: make(map[string]*cachedStmt), seen: make(map[string]struct{})}, nil
}

// lookup returns the prepared statement of query, preparing it on its
// second run, or nil when the call should run uncached.
func (c *cachingConn) lookup(ctx context.Context, query string) (*cachedStmt, error) {
	c.clock++
	if s := c.stmts[query]; s != nil {
		if s.busy {
			return nil, nil
		}
		s.used = c.clock
		return s, nil
	}
	if _, ok := c.seen[query]; !ok {
		if len(c.seen) >= seenTexts {
			clear(c.seen)
		}
		c.seen[query] = struct{}{}
		return nil, nil
	}
	ds, err := c.innerConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := ds.(interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	})
	if !ok {
		_ = ds.Close()
		return nil, nil
	}
	if len(c.stmts) >= cachedStmts {
		c.evict()
	}
	delete(c.seen, query)
	s := &cachedStmt{stmt: st, used: c.clock}
	c.stmts[query] = s
	return s, nil
}

// evict closes the least recently used statement that is not busy.
func (c *cachingConn) evict() {
	var oldest string
	var found *cachedStmt
	for q, s := range c.stmts {
		if !s.busy && (found == nil || s.used < found.used) {
			oldest, found = q, s
		}
	}
	if found != nil {
		_ = found.stmt.Close()
		delete(c.stmts, oldest)
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := c.lookup(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.innerConn.ExecContext(ctx, query, args)
	}
	s.busy = true
	defer func() { s.busy = false }()
	return s.stmt.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := c.lookup(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.innerConn.QueryContext(ctx, query, args)
	}
	rows, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	s.busy = true
	return &cachedRows{Rows: rows, s: s}, nil
}

// Close finalizes the cached statements and closes the connection.
func (c *cachingConn) Close() error {
	var errs []error
	for q, s := range c.stmts {
		errs = append(errs, s.stmt.Close())
		delete(c.stmts, q)
	}
	return errors.Join(append(errs, c.innerConn.Close())...)
}

// cachedRows frees its statement for reuse when closed.
type cachedRows struct {
	driver.Rows
	s *cachedStmt
}

func (r *cachedRows) Close() error {
	if r.s == nil {
		return nil
	}
	err := r.Rows.Close()
	r.s.busy, r.s = false, nil
	return err
}

func (r *cachedRows) Next(dest []driver.Value) error {
	if r.s == nil {
		return io.EOF
	}
	return r.Rows.Next(dest)
}
