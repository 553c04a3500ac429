package sqlqueue_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

// pgxStatements adapts a pgx.Tx to hook.Statements, as
// sqlqueue/postgres does.
type pgxStatements struct{ tx pgx.Tx }

func (s pgxStatements) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := s.tx.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (s pgxStatements) Query(ctx context.Context, query string, args ...any) (hook.Rows, error) {
	return s.tx.Query(ctx, query, args...)
}

// TestTxStatementsPgx pushes through a pgx.Tx: visible iff committed, and a
// duplicate does not abort the transaction.
func TestTxStatementsPgx(t *testing.T) {
	b := serverBackend(t, sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN")
	q := newStore(t, b).queue(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testutil.DSN(t, testutil.PostgresEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	held := queue.Job{Queue: "px", Name: "n", UniqueKey: "k"}
	if err := q.Push(ctx, held); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := hook.Of(q).Tx(pgxStatements{tx})
	if err := p.Push(ctx, queue.Job{Queue: "px", Name: "n", UniqueKey: "k"}); !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("duplicate in a pgx.Tx = %v, want ErrDuplicate", err)
	}
	if stored, err := p.PushMany(ctx, []queue.Job{{Queue: "px", Name: "a"}, {Queue: "px", Name: "b"}}); err != nil || len(stored) != 2 || !stored[0] || !stored[1] {
		t.Fatalf("PushMany in a pgx.Tx after a duplicate = %v, %v", stored, err)
	}
	if n, _ := q.Len(ctx, "px"); n != 1 {
		t.Fatalf("Len before commit = %d, want 1", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n, _ := q.Len(ctx, "px"); n != 3 {
		t.Fatalf("Len after commit = %d, want 3", n)
	}
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := hook.Of(q).Tx(pgxStatements{tx}).Push(ctx, queue.Job{Queue: "px", Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Len(ctx, "px"); n != 3 {
		t.Fatalf("Len after rollback = %d, want 3", n)
	}
}

// TestCopyRowsPgx bulk-loads with COPY from CopyRows and reserves the jobs
// in insertion order.
func TestCopyRowsPgx(t *testing.T) {
	b := serverBackend(t, sqlqueue.Postgres, "pgx", "MERIDIAN_POSTGRES_DSN")
	q := newStore(t, b).queue(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testutil.DSN(t, testutil.PostgresEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	jobs := make([]queue.Job, 300)
	for i := range jobs {
		jobs[i] = queue.Job{ID: queue.NewID(), Queue: "cp", Name: "n", Payload: []byte{byte(i), 0, 0xff}, Tags: []string{"bulk"}, Meta: map[string]string{"i": "x"}}
	}
	table, cols, rows := hook.Of(q).CopyRows(jobs)
	n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
	if err != nil || n != int64(len(jobs)) {
		t.Fatalf("CopyFrom = %d, %v", n, err)
	}
	got, err := q.Reserve(ctx, []string{"cp"}, 500, time.Minute)
	if err != nil || len(got) != len(jobs) {
		t.Fatalf("Reserve = %d jobs, %v", len(got), err)
	}
	for i, j := range got {
		if j.ID != jobs[i].ID || !bytes.Equal(j.Payload, jobs[i].Payload) || !slices.Equal(j.Tags, jobs[i].Tags) || j.Meta["i"] != "x" || j.Attempts != 1 {
			t.Fatalf("job %d = %+v, want %+v reserved in insertion order", i, j, jobs[i])
		}
	}
}
