// Package mysql brings MySQL 8 and MariaDB 10.6+ to sqlqueue: it imports
// github.com/go-sql-driver/mysql and registers the mysql:// scheme with
// queue.Open. Import it for its side effect, or call Open:
//
//	import _ "github.com/meridianjobs/meridian/sqlqueue/mysql"
//
//	q, err := queue.Open(ctx, "mysql://app:secret@db:3306/app")
//
// # URLs
//
// mysql://user:password@host:port/database?param=value becomes the
// driver's DSN user:password@tcp(host:port)/database?param=value (port
// 3306 when omitted). No DSN flag is needed: sqlqueue stores times as
// integers, so parseTime is not required. sqlqueue's own parameters
// (sqlqueue.URLParams: table, setup=false, visibility_timeout, retention,
// ...) are taken out first; setup=false skips creating missing tables when
// migrations own the schema (Setup runs by default). A parameter neither
// sqlqueue nor the driver reads is refused rather than sent to the server
// as a system variable. A queue opened from a URL owns its database: release it with
// (*sqlqueue.Queue).Close.
//
// # Connections
//
// Open turns on the driver's interpolateParams, so a statement with
// arguments is one round trip instead of three (prepare, execute, close);
// it is safe with the driver's default utf8mb4 collation, and Open leaves
// it off when the DSN names interpolateParams itself or an unsafe
// collation (big5, gbk, sjis and the like). The pool holds up to 16
// connections (a mysql:// URL sets it with pool_max_conns; a DSN cannot)
// and keeps every one idle between uses rather than database/sql's two.
//
// Programs that open their own *sql.DB with the "mysql" driver call
// sqlqueue.New directly and need not import this package. To get the same
// speed, add interpolateParams=true to the DSN and set MaxIdleConns to
// MaxOpenConns:
//
//	db, err := sql.Open("mysql", "app:secret@tcp(db:3306)/app?interpolateParams=true")
//	db.SetMaxOpenConns(16)
//	db.SetMaxIdleConns(16)
package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	driver "github.com/go-sql-driver/mysql"

	"github.com/meridianjobs/meridian/internal/urlquery"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

func init() {
	queue.Register("mysql", open)
}

// Open connects to the MySQL or MariaDB database dsn (the driver's DSN
// form, user:password@tcp(host:port)/database), runs Setup and returns the
// queue with opts. The queue owns the connection pool: Close releases it.
func Open(ctx context.Context, dsn string, opts ...sqlqueue.Option) (*sqlqueue.Queue, error) {
	return openDSN(ctx, dsn, true, maxConns, opts)
}

// maxConns is the pool size of Open: every connection is kept idle, since
// a worker's calls come back at once and a closed connection costs a new
// handshake.
const maxConns = 16

func openDSN(ctx context.Context, dsn string, setup bool, conns int, opts []sqlqueue.Option) (*sqlqueue.Queue, error) {
	connector, err := newConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue/mysql: opening database: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return hook.OpenOwned(ctx, setup, db.Close,
		func() (*sqlqueue.Queue, error) {
			return sqlqueue.New(db, append([]sqlqueue.Option{sqlqueue.WithDialect(sqlqueue.MySQL)}, opts...)...)
		},
		func(q *sqlqueue.Queue) { hook.Of(q).Own(db.Close) })
}

// newConnector is the driver's connector for dsn with interpolateParams on
// unless the DSN sets it or its collation makes it unsafe.
func newConnector(dsn string) (sqldriver.Connector, error) {
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(strings.ToLower(dsn), "interpolateparams=") {
		with := cfg.Clone()
		with.InterpolateParams = true
		if c, err := driver.NewConnector(with); err == nil {
			return c, nil
		}
	}
	return driver.NewConnector(cfg)
}

// DSN converts a mysql:// URL into the driver's DSN, without sqlqueue's
// own parameters (sqlqueue.URLParams).
func DSN(u *url.URL) (string, error) {
	cfg := driver.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:3306"
	} else if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	dsn := cfg.FormatDSN()
	params, err := urlquery.Values(u)
	if err != nil {
		return "", fmt.Errorf("sqlqueue/mysql: %w", err)
	}
	for _, k := range sqlqueue.URLParams {
		params.Del(k)
	}
	if len(params) > 0 {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + params.Encode()
	}
	if _, err := driver.ParseDSN(dsn); err != nil {
		return "", fmt.Errorf("sqlqueue/mysql: URL %s does not make a valid DSN: %w", u.Redacted(), err)
	}
	return dsn, nil
}

func open(ctx context.Context, u *url.URL) (queue.Queue, error) {
	params, err := urlquery.Values(u)
	if err != nil {
		return nil, fmt.Errorf("sqlqueue/mysql: %w", err)
	}
	conns := maxConns
	if v, ok := params[poolParam]; ok {
		n, err := strconv.Atoi(v[len(v)-1])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("sqlqueue/mysql: URL parameter %s must be a positive number of connections, not %q", poolParam, v[len(v)-1])
		}
		conns = n
		params.Del(poolParam)
	}
	opts, setup, err := urlOptions(params)
	if err != nil {
		return nil, err
	}
	bare := *u
	bare.RawQuery = params.Encode()
	dsn, err := DSN(&bare)
	if err != nil {
		return nil, err
	}
	return openDSN(ctx, dsn, setup, conns, opts)
}

// poolParam is the mysql:// URL parameter that sizes the pool (default
// maxConns), named as pgxpool names its own.
const poolParam = "pool_max_conns"

// urlOptions reads sqlqueue's parameters of a URL; the others are the
// driver's.
func urlOptions(v url.Values) ([]sqlqueue.Option, bool, error) {
	opts, setup, err := sqlqueue.URLOptions(v)
	if err != nil {
		return nil, false, err
	}
	if err := sqlqueue.CheckDriverParams(v, "go-sql-driver/mysql", mysqlParams); err != nil {
		return nil, false, err
	}
	return opts, setup, nil
}

// mysqlParams are the DSN parameters go-sql-driver/mysql reads. Anything
// else in a mysql:// URL is refused rather than sent to the server as a
// system variable.
var mysqlParams = []string{
	"allowAllFiles", "allowCleartextPasswords", "allowFallbackToPlaintext", "allowNativePasswords", "allowOldPasswords",
	"charset", "checkConnLiveness", "clientFoundRows", "collation", "columnsWithAlias", "connectionAttributes",
	"interpolateParams", "loc", "timeTruncate", "maxAllowedPacket", "multiStatements", "parseTime", "readTimeout",
	"rejectReadOnly", "serverPubKey", "timeout", "tls", "writeTimeout", "compress",
}
