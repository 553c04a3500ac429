package sqlqueue_test

import (
	"os"
	"testing"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// FuzzPushReserve runs the suite's round-trip fuzz target on every dialect
// at once: SQLite always, PostgreSQL and MariaDB when their DSNs are set.
func FuzzPushReserve(f *testing.F) {
	queues := map[string]queue.Queue{"sqlite": newStore(f, sqliteBackend()).queue(f)}
	for _, s := range []struct {
		d           sqlqueue.Dialect
		driver, env string
	}{{sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN"}, {sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN"}} {
		if os.Getenv(s.env) == "" && os.Getenv("CI") != "true" {
			f.Logf("%s not set: fuzzing without %s", s.env, s.d)
			continue
		}
		queues[string(s.d)] = newStore(f, serverBackend(f, s.d, s.driver, s.env)).queue(f)
	}
	contracttest.FuzzPushReserve(f, queues)
}
