package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

func TestOpenURL(t *testing.T) {
	dsn := testutil.DSN(t, testutil.PostgresEnv)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("MERIDIAN_POSTGRES_DSN is not a URL: %v", err)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	table := "mt_" + hex.EncodeToString(r[:])
	for _, scheme := range []string{"postgres", "postgresql"} {
		v := u.Query()
		v.Set("table", table)
		v.Set("retention", "1h") // URLs carry the constructor's options
		u.Scheme, u.RawQuery = scheme, v.Encode()
		q, err := queue.Open(t.Context(), u.String())
		if err != nil {
			t.Fatalf("Open(%s): %v", scheme, err)
		}
		sq := q.(*postgres.Queue)
		if sq.Dialect() != sqlqueue.Postgres || sq.Table() != table {
			t.Fatalf("dialect %q table %q, want postgres %s", sq.Dialect(), sq.Table(), table)
		}
		if err := queue.Dispatch(t.Context(), q, struct{ S string }{scheme}); err != nil {
			t.Fatalf("Dispatch: %v", err)
		}
		got, err := q.Reserve(t.Context(), nil, 10, time.Minute)
		if err != nil || len(got) != 1 {
			t.Fatalf("Reserve = %v, %v; want one job", got, err)
		}
		if err := testutil.Ack(t.Context(), q, got[0].Lease()); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		if info, err := sq.GetJob(t.Context(), got[0].ID); err != nil || info.State != queue.StateDone {
			t.Errorf("with retention=1h the acked job is %v, %v; want kept as done", info.State, err)
		}
		if err := sq.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	// A parameter neither sqlqueue nor pgx knows is refused here, not
	// sent to the server as a setting.
	bad := *u
	bad.RawQuery = u.Query().Encode() + "&tabel=x"
	if _, err := queue.Open(t.Context(), bad.String()); err == nil || !strings.Contains(err.Error(), `unknown URL parameter "tabel"`) {
		t.Errorf("Open with a misspelt parameter = %v, want it refused by name", err)
	}
	t.Cleanup(func() {
		q, err := queue.Open(context.Background(), u.String())
		if err != nil {
			return
		}
		defer q.(*postgres.Queue).Close()
		if err := q.(*postgres.Queue).DropTables(context.Background()); err != nil {
			t.Errorf("DropTables: %v", err)
		}
	})
}

// TestOpenRefusesMalformedQuery checks that Open refuses a URL whose query
// url.ParseQuery rejects, before connecting: pgx reads it with
// url.URL.Query, which drops the parameter and opens meridian_jobs.
func TestOpenRefusesMalformedQuery(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://u@127.0.0.1:1/db?sslmode=disable&application_name=app;x",
		"postgresql://u@127.0.0.1:1/db?sslmode=disable&application_name=a%zz",
	} {
		q, err := postgres.Open(t.Context(), dsn)
		if err == nil {
			_ = q.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "malformed URL query") {
			t.Errorf("Open(%q) = %v, want a malformed URL query error", dsn, err)
		}
	}
}
