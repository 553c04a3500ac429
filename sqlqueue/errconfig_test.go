package sqlqueue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestErrConfig checks that the errors no retry can fix match
// queue.ErrConfig, so a Worker stops on them: tables never set up, tables
// of another schema version, and a jobs table dropped under a queue in use
// (the driver's own "no such table", classified by the dialect).
func TestErrConfig(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		db := b.open(t, s.path)
		bare, err := sqlqueue.New(db, sqlqueue.WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		if err := bare.Push(t.Context(), queue.Job{Name: "x"}); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("Push on a missing table = %v, want queue.ErrConfig", err)
		}
		if _, err := bare.Reserve(t.Context(), nil, 1, time.Minute); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("Reserve on a missing table = %v, want queue.ErrConfig", err)
		}

		q, db := s.open(t)
		if err := q.Push(t.Context(), queue.Job{Name: "x"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), "DROP TABLE "+s.table); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Reserve(t.Context(), nil, 1, time.Minute); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("Reserve after the jobs table was dropped = %v, want queue.ErrConfig", err)
		}
		if err := q.Push(t.Context(), queue.Job{Name: "y"}); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("Push after the jobs table was dropped = %v, want queue.ErrConfig", err)
		}

		if _, err := db.ExecContext(t.Context(), "UPDATE "+s.table+"_meta SET value = '2' WHERE name = 'schema_version'"); err != nil {
			t.Fatal(err)
		}
		newer, err := sqlqueue.New(db, sqlqueue.WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newer.Len(t.Context(), ""); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("Len on schema version 2 = %v, want queue.ErrConfig", err)
		}
	})
}
