package mysql

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

// TestNewConnectorInterpolates checks that Open's connections send a
// statement with arguments as one query (no server-side prepare) unless
// the DSN turns interpolateParams off itself or names a collation that
// makes it unsafe.
func TestNewConnectorInterpolates(t *testing.T) {
	dsn := testutil.DSN(t, testutil.MySQLEnv)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	tests := []struct {
		name     string
		dsn      string
		prepares int
	}{
		{"default", dsn, 0},
		{"interpolateParams=false kept", dsn + sep + "interpolateParams=false", 1},
		{"unsafe collation", dsn + sep + "collation=gbk_chinese_ci", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := newConnector(tt.dsn)
			if err != nil {
				t.Fatalf("newConnector(%q): %v", tt.dsn, err)
			}
			db := sql.OpenDB(c)
			defer db.Close()
			conn, err := db.Conn(t.Context())
			if err != nil {
				t.Fatalf("connecting: %v", err)
			}
			defer conn.Close()
			before := prepares(t, conn)
			var n int
			if err := conn.QueryRowContext(t.Context(), "SELECT ? + 1", 41).Scan(&n); err != nil || n != 42 {
				t.Fatalf("SELECT ? + 1 = %d, %v; want 42", n, err)
			}
			if got := prepares(t, conn) - before; got != tt.prepares {
				t.Errorf("server-side prepares for one statement with an argument = %d, want %d", got, tt.prepares)
			}
		})
	}
}

// prepares returns the session's count of server-side prepared
// statements.
func prepares(t *testing.T, conn *sql.Conn) int {
	t.Helper()
	var (
		name string
		n    int
	)
	if err := conn.QueryRowContext(t.Context(), "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n); err != nil {
		t.Fatalf("reading Com_stmt_prepare: %v", err)
	}
	return n
}
