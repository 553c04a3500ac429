package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// sqlTestTargets returns SQLite in a temporary file and the SQL servers
// that MERIDIAN_POSTGRES_DSN and MERIDIAN_MYSQL_DSN name. A server that is
// not named is left out with a log line, or fails the test when CI=true.
func sqlTestTargets(tb testing.TB) []Target {
	out := []Target{SQLite(filepath.Join(tb.TempDir(), "bench.db"))}
	for _, s := range []struct {
		env  string
		make func(string) *SQL
	}{
		{"MERIDIAN_POSTGRES_DSN", Postgres},
		{"MERIDIAN_MYSQL_DSN", MySQL},
	} {
		dsn := os.Getenv(s.env)
		if dsn == "" {
			if os.Getenv("CI") == "true" {
				tb.Fatalf("%s is not set (CI=true needs every database)", s.env)
			}
			tb.Logf("%s is not set: skipping that driver", s.env)
			continue
		}
		out = append(out, s.make(dsn))
	}
	return out
}
