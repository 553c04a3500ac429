// Package sqlite registers the sqlite:// scheme with queue.Open, backed by
// sqlqueue over modernc.org/sqlite (pure Go, no cgo). Import it for its side
// effect:
//
//	import _ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
//
//	q, err := queue.Open(ctx, "sqlite://jobs.db")
//
// # URLs
//
// sqlite://jobs.db and sqlite://./data/jobs.db are relative to the working
// directory, sqlite:///var/lib/app/jobs.db is absolute, sqlite::memory:
// is an in-memory database that lives until Close. Query parameters are
// sqlqueue's (sqlqueue.URLParams: table, setup=false to skip creating
// missing tables when migrations create them, visibility_timeout,
// retention, ...); any other is refused. With setup=false a
// file without the queue's tables keeps its journal mode: it is switched
// to WAL only once the tables are found (a missing file is still created
// at first use, so that Migrate can make the tables in it). The queue
// owns the database it opened: close it with its Close method
// (*sqlqueue.Queue).
//
// It opens two handles on the file: the queue's, of one connection (the
// writer, see sqlqueue.New), and one of two connections for the
// inspection reads (sqlqueue.WithReads: the dashboard's lists and
// figures), which in WAL mode run beside the writer instead of waiting
// for the workers' claims and acks. An in-memory database has the one.
//
// The connections it opens keep the statements sqlqueue runs again and
// again prepared (up to 48 per connection), so SQLite parses each only
// once. They use the driver modernc.org/sqlite registers as "sqlite", with
// whatever functions and hooks were registered on it.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/meridianjobs/meridian/internal/urlquery"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
	"modernc.org/sqlite"
)

func init() {
	queue.Register("sqlite", open)
}

// Open opens the SQLite file path as a queue with opts, running Setup.
func Open(ctx context.Context, path string, opts ...sqlqueue.Option) (*sqlqueue.Queue, error) {
	return openDB(ctx, path, true, opts)
}

func openDB(ctx context.Context, path string, setup bool, opts []sqlqueue.Option) (*sqlqueue.Queue, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlqueue/sqlite: no database file in URL (want sqlite://path/to/file.db)")
	}
	drv, err := registered()
	if err != nil {
		return nil, fmt.Errorf("sqlqueue/sqlite: opening %s: %w", path, err)
	}
	db := sql.OpenDB(&connector{dsn: path, drv: drv})
	closeDB := db.Close
	opts = append([]sqlqueue.Option{sqlqueue.WithDialect(sqlqueue.SQLite)}, opts...)
	if !inMemory(path) {
		// The inspection reads (the dashboard's) on connections of their
		// own: the queue's handle has one connection, the writer's, and
		// in WAL mode readers need not wait for it (sqlqueue.WithReads).
		reads := sql.OpenDB(&connector{dsn: path, drv: drv, pragmas: readPragmas})
		reads.SetMaxOpenConns(readConns)
		opts = append(opts, sqlqueue.WithReads(reads))
		closeDB = func() error { return errors.Join(db.Close(), reads.Close()) }
	}
	return hook.OpenOwned(ctx, setup, closeDB,
		func() (*sqlqueue.Queue, error) { return sqlqueue.New(db, opts...) },
		func(q *sqlqueue.Queue) { hook.Of(q).Own(closeDB) })
}

// readConns is how many connections the inspection reads use.
const readConns = 2

// readPragmas set up a connection of the inspection reads: it waits for
// a lock as the queue's own does (a checkpoint, or the WAL's recovery,
// can hold readers off briefly) and refuses to write.
const readPragmas = "PRAGMA busy_timeout=30000; PRAGMA query_only=1"

// inMemory reports whether path names an in-memory database, which a
// second handle would not share.
func inMemory(path string) bool {
	return path == ":memory:" || strings.Contains(path, "mode=memory") || strings.HasPrefix(path, "file::memory:")
}

// registered returns the driver modernc.org/sqlite registers as "sqlite",
// which carries the functions and hooks registered with that package.
var registered = sync.OnceValues(func() (*sqlite.Driver, error) {
	db, err := sql.Open("sqlite", "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	drv, ok := db.Driver().(*sqlite.Driver)
	if !ok {
		return nil, fmt.Errorf("the driver registered as sqlite is a %T, not modernc.org/sqlite's", db.Driver())
	}
	return drv, nil
})

func open(ctx context.Context, u *url.URL) (queue.Queue, error) {
	path := u.Opaque
	if path == "" {
		path = u.Host + u.Path
	}
	params, err := urlquery.Values(u)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue/sqlite: %w", err)
	}
	opts, setup, err := sqlqueue.URLOptions(params)
	if err != nil {
		return nil, err
	}
	if err := sqlqueue.CheckDriverParams(params, "the SQLite opener", nil); err != nil {
		return nil, err
	}
	return openDB(ctx, path, setup, opts)
}
