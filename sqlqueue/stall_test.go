package sqlqueue_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// TestSQLiteClaimReadsItsClockUnderTheWriteLock is issue 25's SQLite
// fault: a claim that waits for the write lock (another process's long
// transaction) must read its clock once it holds the lock, so that it never
// hands out a lease that has already expired.
func TestSQLiteClaimReadsItsClockUnderTheWriteLock(t *testing.T) {
	t.Parallel()
	s := newStore(t, sqliteBackend())
	q := s.queue(t)
	if err := q.Push(t.Context(), queue.Job{Name: "n"}); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	const lease, held = 500 * time.Millisecond, 1500 * time.Millisecond
	released := make(chan error, 1)
	time.AfterFunc(held, func() {
		_, err := conn.ExecContext(t.Context(), "COMMIT")
		released <- err
	})
	jobs, err := q.Reserve(t.Context(), nil, 1, lease)
	got := time.Now()
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve after the lock was released: %d jobs, %v", len(jobs), err)
	}
	if exp := jobs[0].LeaseExpiresAt; !exp.After(got) {
		t.Fatalf("the claim returned at %s a lease expiring at %s: already expired (the clock was read before the lock wait)",
			got.Format(time.StampMicro), exp.Format(time.StampMicro))
	}
}
