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
// retention, ...); any other is refused. With setup=false the open
// changes nothing: a missing file is an error (not a new empty file), and
// the file is switched to WAL only once its tables are found. The queue
// owns the database it opened: close it with its Close method
// (*sqlqueue.Queue).
//
// The connections it opens keep the statements sqlqueue runs again and
// again prepared (up to 48 per connection), so SQLite parses each only
// once. They use the driver modernc.org/sqlite registers as "sqlite", with
// whatever functions and hooks were registered on it.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"sync"

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
	dsn := path
	if !setup && path != ":memory:" {
		// Without Setup the file must exist: open it read-write, never
		// create it, so a mistyped path is an error and not a new file.
		dsn = "file:" + uriEscaper.Replace(path) + "?mode=rw"
	}
	db := sql.OpenDB(&connector{dsn: dsn, drv: drv})
	return hook.OpenOwned(ctx, setup, db.Close,
		func() (*sqlqueue.Queue, error) {
			return sqlqueue.New(db, append([]sqlqueue.Option{sqlqueue.WithDialect(sqlqueue.SQLite)}, opts...)...)
		},
		func(q *sqlqueue.Queue) { hook.Of(q).Own(db.Close) })
}

// uriEscaper escapes what a SQLite URI filename would read as syntax.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

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
	params := u.Query()
	opts, setup, err := sqlqueue.URLOptions(params)
	if err != nil {
		return nil, err
	}
	if err := sqlqueue.CheckDriverParams(params, "the SQLite opener", nil); err != nil {
		return nil, err
	}
	return openDB(ctx, path, setup, opts)
}
