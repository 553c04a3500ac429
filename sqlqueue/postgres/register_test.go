package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
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
		if err := q.Ack(t.Context(), got[0].Lease()); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		if err := sq.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
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
