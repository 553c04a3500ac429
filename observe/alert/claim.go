package alert

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"sync"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Claimer records the state of each alert for the cluster and decides who
// calls the hook for a transition.
type Claimer interface {
	// Claim sets the alert key's state to firing and reports whether this
	// call changed it: for firing, the state was absent or cleared; for
	// cleared, it was firing. Of several concurrent calls that make the
	// same change, exactly one reports true.
	Claim(ctx context.Context, key string, firing bool) (won bool, err error)
}

// MemoryClaimer keeps alert states in the process: right for one process,
// and the default.
type MemoryClaimer struct {
	mu     sync.Mutex
	firing map[string]bool
}

// NewMemoryClaimer returns an empty MemoryClaimer.
func NewMemoryClaimer() *MemoryClaimer { return &MemoryClaimer{firing: make(map[string]bool)} }

// Claim implements Claimer.
func (m *MemoryClaimer) Claim(_ context.Context, key string, firing bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.firing[key] == firing {
		return false, nil
	}
	m.firing[key] = firing
	return true, nil
}

// DB is what SQLClaimer needs of a database: *sql.DB, *sql.Conn or
// *sql.Tx.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SQLClaimer keeps alert states in a PostgreSQL table, so that every
// process of a cluster shares them: each transition is one statement whose
// row lock lets exactly one process win it.
type SQLClaimer struct {
	db     DB
	table  string
	leases string // FencedBy's table, or ""
}

// SQLClaimerOption configures NewSQLClaimer.
type SQLClaimerOption func(*SQLClaimer) error

// FencedBy makes claims made under a driver.Fence (see WithElection) check
// it in the claim's statement: table is the table that holds the lease,
// sqlqueue's "<table>_meta" (its lease rows are named "lease:" and the
// lease's name, with the lease's epoch in an epoch column), in the same
// database. A claim whose Fence is stale, because another process was
// elected since, is refused with an error matching queue.ErrFenced, and
// the lease's row is locked until the claim commits, so no election
// passes it by. table must be a plain identifier.
func FencedBy(table string) SQLClaimerOption {
	return func(c *SQLClaimer) error {
		if !identifier.MatchString(table) {
			return fmt.Errorf("alert: lease table name %q is not a plain identifier", table)
		}
		c.leases = table
		return nil
	}
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// NewSQLClaimer returns a claimer over table in the PostgreSQL database
// db (opened with a PostgreSQL database/sql driver, e.g. pgx's stdlib),
// creating the table if it does not exist. table must be a plain
// identifier.
func NewSQLClaimer(ctx context.Context, db DB, table string, opts ...SQLClaimerOption) (*SQLClaimer, error) {
	if !identifier.MatchString(table) {
		return nil, fmt.Errorf("alert: table name %q is not a plain identifier", table)
	}
	c := &SQLClaimer{db: db, table: table}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
	alert_key  text PRIMARY KEY,
	firing     boolean NOT NULL,
	changed_at timestamptz NOT NULL DEFAULT now()
)`)
	if err != nil {
		return nil, fmt.Errorf("alert: creating the claim table %s: %w", table, err)
	}
	return c, nil
}

// Claim implements Claimer. Crossing inserts the row or flips it from
// cleared; clearing flips it from firing. Under PostgreSQL's ON CONFLICT
// and row locks, of concurrent calls only one sees a row returned. With
// FencedBy and a driver.Fence in ctx, the same statement checks the fence.
func (c *SQLClaimer) Claim(ctx context.Context, key string, firing bool) (bool, error) {
	if f, ok := driver.FenceFrom(ctx); ok && c.leases != "" {
		return c.claimFenced(ctx, key, firing, f)
	}
	var q string
	if firing {
		q = `INSERT INTO ` + c.table + ` AS t (alert_key, firing) VALUES ($1, true)
ON CONFLICT (alert_key) DO UPDATE SET firing = true, changed_at = now() WHERE NOT t.firing
RETURNING true`
	} else {
		q = `UPDATE ` + c.table + ` SET firing = false, changed_at = now() WHERE alert_key = $1 AND firing RETURNING true`
	}
	var won bool
	err := c.db.QueryRowContext(ctx, q, key).Scan(&won)
	switch {
	case err == sql.ErrNoRows:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("alert: claiming %q: %w", key, err)
	}
	return won, nil
}

// claimFenced is Claim checking f in the same statement: it locks the
// lease's row (FOR UPDATE: an election waits for the claim to commit, and
// a claim waiting for an election reads the new epoch) and changes the
// claim only if the lease's epoch is f's.
func (c *SQLClaimer) claimFenced(ctx context.Context, key string, firing bool, f driver.Fence) (bool, error) {
	change := `UPDATE ` + c.table + ` SET firing = false, changed_at = now() WHERE alert_key = $1 AND firing AND (SELECT epoch FROM fence) = $3 RETURNING true`
	if firing {
		change = `INSERT INTO ` + c.table + ` AS t (alert_key, firing) SELECT $1, true WHERE (SELECT epoch FROM fence) = $3
ON CONFLICT (alert_key) DO UPDATE SET firing = true, changed_at = now() WHERE NOT t.firing
RETURNING true`
	}
	q := `WITH fence AS (SELECT epoch FROM ` + c.leases + ` WHERE name = $2 FOR UPDATE), won AS (` + change + `)
SELECT COALESCE((SELECT epoch FROM fence), 0), EXISTS (SELECT 1 FROM won)`
	var epoch int64
	var won bool
	if err := c.db.QueryRowContext(ctx, q, key, "lease:"+f.Lease, f.Epoch).Scan(&epoch, &won); err != nil {
		return false, fmt.Errorf("alert: claiming %q: %w", key, err)
	}
	if epoch != f.Epoch {
		return false, fmt.Errorf("alert: claiming %q: lease %s is past epoch %d: %w", key, f.Lease, f.Epoch, queue.ErrFenced)
	}
	return won, nil
}
