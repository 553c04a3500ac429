package sqlqueue_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue/driver"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// FuzzPushReserve runs the suite's round-trip fuzz target on every dialect
// at once: SQLite always, PostgreSQL and MariaDB when their DSNs are set.
func FuzzPushReserve(f *testing.F) {
	queues := map[string]queue.Queue{}
	for name, q := range fuzzQueues(f) {
		queues[name] = q
	}
	contracttest.FuzzPushReserve(f, queues)
}

// fuzzQueues opens a queue on every dialect, by name: SQLite always,
// PostgreSQL and MariaDB when their DSNs are set (under CI they must be).
func fuzzQueues(f *testing.F) map[string]*sqlqueue.Queue {
	queues := map[string]*sqlqueue.Queue{"sqlite": newStore(f, sqliteBackend()).queue(f)}
	for _, s := range []struct {
		d           sqlqueue.Dialect
		driver, env string
	}{{sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN"}, {sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN"}} {
		if os.Getenv(s.env) == "" && !testutil.CI() {
			f.Logf("%s not set: fuzzing without %s", s.env, s.d)
			continue
		}
		queues[string(s.d)] = newStore(f, serverBackend(f, s.d, s.driver, s.env)).queue(f)
	}
	return queues
}

// FuzzSearchIndex: the search index never misses a match. For a payload
// and a search of any bytes, on every dialect whose index is on (SQLite
// always; PostgreSQL, and MariaDB with its Mroonga engine, when their
// DSNs are set), the index's condition holds of a job whose payload holds
// the search, wherever the index answers the search at all (the exact
// byte test, which stays in every query, drops what it finds besides).
func FuzzSearchIndex(f *testing.F) {
	stores := fuzzQueues(f)
	for name, q := range stores {
		if err := q.EnableSearchIndex(f.Context()); errors.Is(err, driver.ErrUnsupported) && !testutil.CI() {
			f.Logf("%s: no search index: %v", name, err)
			delete(stores, name)
		} else if err != nil {
			f.Fatalf("%s: EnableSearchIndex: %v", name, err)
		}
		f.Cleanup(func() { _ = q.DisableSearchIndex(context.Background()) })
	}
	for _, seed := range [][2]string{
		{`{"user_id":42,"note":"needle"}`, `"needle"`},
		{"a\\\"b(c)d OR e", "\\\"b("},
		{"\xff\xfe\x00\x80needle", "\x00\x80ne"},
		{"café latte", "é l"},
		{"caf\xc3\xa9\xa9x", "\xc3\xa9\xa9"},
		{"  spaced   out  ", "d   o"},
		{"+a -b *c ~d <e >f", "-b *"},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, payload, search []byte) {
		if !bytes.Contains(payload, search) {
			// Only matches are checked: build one from the payload.
			if len(payload) == 0 {
				return
			}
			search = payload[len(payload)/3 : len(payload)/3+min(len(search)+3, len(payload)-len(payload)/3)]
		}
		for name, q := range stores {
			j := driver.Job{ID: driver.NewID(), Queue: "fz", Name: "n", Payload: payload}
			if err := q.Push(t.Context(), j); err != nil {
				t.Fatalf("%s: Push: %v", name, err)
			}
			held, indexed, err := sqlqueue.IndexHolds(t.Context(), q, j.ID, string(search))
			if err != nil {
				t.Fatalf("%s: the index's condition for %q: %v", name, search, err)
			}
			if indexed && !held {
				t.Errorf("%s: the index misses payload %q holding %q", name, payload, search)
			}
		}
	})
}
