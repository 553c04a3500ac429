package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

func TestOpenURL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	q, err := queue.Open(t.Context(), "sqlite://"+path+"?table=app_jobs")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	sq := q.(*sqlqueue.Queue)
	t.Cleanup(func() {
		if err := sq.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if sq.Table() != "app_jobs" || sq.Dialect() != sqlqueue.SQLite {
		t.Fatalf("table %q dialect %q, want app_jobs sqlite", sq.Table(), sq.Dialect())
	}
	if err := queue.Dispatch(t.Context(), q, struct{ N int }{7}); err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	got, err := q.Reserve(t.Context(), nil, 10, time.Minute)
	if err != nil || len(got) != 1 || string(got[0].Payload) != `{"N":7}` {
		t.Fatalf("Reserve = %v, %v; want the dispatched job", got, err)
	}
	if err := testutil.Ack(t.Context(), q, got[0].Lease()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// TestOpenMemory opens an in-memory database: the one connection New
// allows keeps it alive until Close.
func TestOpenMemory(t *testing.T) {
	t.Parallel()
	q, err := queue.Open(t.Context(), "sqlite::memory:")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer q.(*sqlqueue.Queue).Close()
	for range 3 {
		if err := queue.Dispatch(t.Context(), q, struct{}{}); err != nil {
			t.Fatalf("Dispatch: %v", err)
		}
	}
	if n, err := q.Len(t.Context(), ""); err != nil || n != 3 {
		t.Fatalf("Len = %d, %v; want 3", n, err)
	}
}

func TestOpenURLErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, url, want string
	}{
		{"no path", "sqlite://", "no database file"},
		{"unknown parameter", "sqlite://" + filepath.Join(dir, "a.db") + "?colour=red", `unknown URL parameter "colour"`},
		{"bad table", "sqlite://" + filepath.Join(dir, "b.db") + "?table=drop%20table", "not allowed"},
		{"bad setup", "sqlite://" + filepath.Join(dir, "c.db") + "?setup=maybe", "true or false"},
		{"bad duration", "sqlite://" + filepath.Join(dir, "d.db") + "?retention=1day", "retention must be a duration"},
		{"driver parameter", "sqlite://" + filepath.Join(dir, "e.db") + "?sslmode=disable", `unknown URL parameter "sslmode"`},
		// url.URL.Query drops a parameter with a ";": the queue would
		// use meridian_jobs instead of the table named.
		{"semicolon in table", "sqlite://" + filepath.Join(dir, "f.db") + "?table=staging;jobs", `parameter "table" contains a ";"`},
		{"bad escape", "sqlite://" + filepath.Join(dir, "g.db") + "?setup=false&table=a%zz", `parameter "table" has an invalid %-escape`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := queue.Open(context.Background(), tt.url)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open(%q) = %v, want an error containing %q", tt.url, err, tt.want)
			}
		})
	}
}

// TestOpenWithoutSetup checks that with setup=false a file without the
// queue's tables keeps its journal mode and gets an error saying to run
// Setup.
func TestOpenWithoutSetup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes (body TEXT)"); err != nil {
		t.Fatal(err)
	}
	q, err := queue.Open(t.Context(), "sqlite://"+other+"?setup=false")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	_, err = q.Len(t.Context(), "")
	q.(*sqlqueue.Queue).Close()
	if err == nil || !strings.Contains(err.Error(), "run Setup") {
		t.Fatalf("Len before Setup = %v, want an error saying to run Setup", err)
	}
	if errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("a missing table is not ErrNotFound: %v", err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if !strings.EqualFold(mode, "delete") {
		t.Fatalf("journal mode of a file without the queue's tables = %q, want it left as delete", mode)
	}
}
