package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

type SendWelcome struct{ UserID int }

// The example needs a PostgreSQL server, so it has no Output comment (go
// test would run it on machines without one); TestExample runs it against
// MERIDIAN_POSTGRES_DSN and checks what it prints.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	q, err := postgres.New(ctx, pool, sqlqueue.WithTable("example_jobs"))
	if err != nil {
		panic(err)
	}
	defer q.Close()
	if err := q.Setup(ctx); err != nil {
		panic(err)
	}
	defer q.DropTables(ctx) // the example leaves nothing behind

	// A worker would call Wait when idle: it returns on the commit's NOTIFY.
	woken := make(chan time.Duration)
	go func() {
		start := time.Now()
		_ = q.Wait(ctx, []string{"mail"}, time.Minute)
		woken <- time.Since(start)
	}()

	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	// ... the caller's own writes in tx ...
	if err := queue.Dispatch(ctx, q.Tx(tx), SendWelcome{UserID: 42}, queue.OnQueue("mail")); err != nil {
		panic(err)
	}
	n, _ := q.Len(ctx, "mail")
	fmt.Println("before commit:", n)
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	fmt.Println("woken before the one-minute safety poll:", <-woken < time.Minute)
	n, _ = q.Len(ctx, "mail")
	fmt.Println("after commit:", n)
	fmt.Println("listener health:", q.Health())
	// It prints, against a server:
	// before commit: 0
	// woken before the one-minute safety poll: true
	// after commit: 1
	// listener health: <nil>
}

// TestExample runs Example against MERIDIAN_POSTGRES_DSN (as DATABASE_URL)
// and compares its output with the one its comment shows.
func TestExample(t *testing.T) {
	t.Setenv("DATABASE_URL", testDSN(t))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	func() {
		defer func() { os.Stdout = stdout; w.Close() }()
		Example()
	}()
	want := "before commit: 0\nwoken before the one-minute safety poll: true\nafter commit: 1\nlistener health: <nil>\n"
	if out := <-got; !bytes.Equal(out, []byte(want)) {
		t.Fatalf("Example printed:\n%s\nwant:\n%s", out, want)
	}
}
