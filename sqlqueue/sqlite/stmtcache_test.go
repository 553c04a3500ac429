package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

// cached reports how many statements db's one connection keeps prepared.
func cached(t *testing.T, db *sql.DB) int {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := -1
	if err := conn.Raw(func(dc any) error {
		n = len(dc.(*cachingConn).stmts)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStmtCache(t *testing.T) {
	drv, err := registered()
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(&connector{dsn: filepath.Join(t.TempDir(), "c.db"), drv: drv})
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	const insert = "INSERT INTO t (k, v) VALUES (?, ?)"
	for k := range 5 {
		if _, err := db.ExecContext(ctx, insert, k, fmt.Sprint("v", k)); err != nil {
			t.Fatal(err)
		}
	}
	if n := cached(t, db); n != 1 {
		t.Fatalf("after 5 runs of one INSERT, %d statements cached, want 1", n)
	}
	// One connection: open rows hold it, so the nested read below must
	// run on it too.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const sel = "SELECT v FROM t WHERE k >= ? ORDER BY k"
	read := func(from int) []string {
		rows, err := conn.QueryContext(ctx, sel, from)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	read(0)
	read(0)
	// The cached SELECT is busy while its rows are open: the same text
	// runs again (uncached) with its own arguments.
	outer, err := conn.QueryContext(ctx, sel, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(1); fmt.Sprint(got) != "[v1 v2 v3 v4]" {
		t.Fatalf("inner read = %v", got)
	}
	var outerVals []string
	for outer.Next() {
		var v string
		if err := outer.Scan(&v); err != nil {
			t.Fatal(err)
		}
		outerVals = append(outerVals, v)
	}
	outer.Close()
	if fmt.Sprint(outerVals) != "[v3 v4]" {
		t.Fatalf("outer read = %v, want [v3 v4]", outerVals)
	}
	if got := read(4); fmt.Sprint(got) != "[v4]" {
		t.Fatalf("read after reuse = %v, want [v4]", got)
	}
	conn.Close()
	// Many texts run twice: the cache stays bounded.
	for i := range 2 * cachedStmts {
		q := fmt.Sprintf("SELECT v FROM t WHERE k = %d", i)
		for range 2 {
			var v string
			if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil && err != sql.ErrNoRows {
				t.Fatal(err)
			}
		}
	}
	if n := cached(t, db); n != cachedStmts {
		t.Fatalf("%d statements cached, want the bound %d", n, cachedStmts)
	}
}
