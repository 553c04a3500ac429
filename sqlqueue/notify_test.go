package sqlqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestPostgresNotify checks that a push sends one notification per
// statement or transaction, never per row, and none for a rolled-back
// transaction.
func TestPostgresNotify(t *testing.T) {
	b := serverBackend(t, sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN")
	s := newStore(t, b)
	q, db := s.open(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testutil.DSN(t, testutil.PostgresEnv))
	if err != nil {
		t.Fatalf("connecting the listener: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{q.NotifyChannel()}.Sanitize()); err != nil {
		t.Fatalf("LISTEN: %v", err)
	}
	next := func(wait time.Duration) (string, bool) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return "", false
		}
		if err != nil {
			t.Fatalf("waiting for a notification: %v", err)
		}
		return n.Payload, true
	}

	jobs := []queue.Job{{Queue: "a", Name: "n"}, {Queue: "b", Name: "n"}, {Queue: "a", Name: "n"}}
	if _, err := queue.PushMany(ctx, q, jobs); err != nil {
		t.Fatal(err)
	}
	if p, ok := next(5 * time.Second); !ok || p != "a\nb" {
		t.Fatalf("notification after PushMany = %q, %v; want one with the queues a and b", p, ok)
	}
	if p, ok := next(200 * time.Millisecond); ok {
		t.Fatalf("a second notification %q for one PushMany", p)
	}

	// A duplicate stores nothing and notifies nothing.
	if err := q.Push(ctx, queue.Job{ID: jobs[0].ID, Queue: "a", Name: "n"}); !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("Push of an active ID = %v, want ErrDuplicate", err)
	}
	if p, ok := next(200 * time.Millisecond); ok {
		t.Fatalf("notification %q for a duplicate", p)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.Dispatch(ctx, q.Tx(tx), struct{}{}, queue.OnQueue("rolled-back")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if p, ok := next(200 * time.Millisecond); ok {
		t.Fatalf("notification %q for a rolled-back transaction", p)
	}

	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := queue.Dispatch(ctx, q.Tx(tx), struct{}{}, queue.OnQueue("c")); err != nil {
			t.Fatal(err)
		}
	}
	if p, ok := next(200 * time.Millisecond); ok {
		t.Fatalf("notification %q before commit", p)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if p, ok := next(5 * time.Second); !ok || p != "c" {
		t.Fatalf("notification after commit = %q, %v; want c", p, ok)
	}
	if p, ok := next(200 * time.Millisecond); ok {
		t.Fatalf("a second notification %q for one transaction", p)
	}
}
