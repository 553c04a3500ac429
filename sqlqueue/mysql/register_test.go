package mysql_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/mysql"
)

func TestDSN(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		{"mysql://root@127.0.0.1:3306/test", "root@tcp(127.0.0.1:3306)/test"},
		{"mysql://app:s3cret@db/app", "app:s3cret@tcp(db:3306)/app"},
		{"mysql://app@db:3307/app?table=jobs&setup=false&timeout=5s", "app@tcp(db:3307)/app?timeout=5s"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mysql.DSN(u)
		if err != nil || got != tt.want {
			t.Errorf("DSN(%s) = %q, %v; want %q", tt.url, got, err, tt.want)
		}
	}
	u, _ := url.Parse("mysql://app@db/app?timeout=soon")
	if _, err := mysql.DSN(u); err == nil {
		t.Errorf("DSN with timeout=soon: no error")
	}
	// url.URL.Query would drop timeout=5s;x and keep the rest.
	u, _ = url.Parse("mysql://app@db/app?timeout=5s;x&parseTime=true")
	if dsn, err := mysql.DSN(u); err == nil || !strings.Contains(err.Error(), `parameter "timeout" contains a ";"`) {
		t.Errorf("DSN with timeout=5s;x = %q, %v; want an error naming the parameter", dsn, err)
	}
}

func TestOpenURL(t *testing.T) {
	dsn := testutil.DSN(t, testutil.MySQLEnv)
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("MERIDIAN_MYSQL_DSN: %v", err)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	table := "mt_" + hex.EncodeToString(r[:])
	u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName, RawQuery: "table=" + table + "&retention=1h&pool_max_conns=4"}
	if cfg.Passwd == "" {
		u.User = url.User(cfg.User)
	}
	q, err := queue.Open(t.Context(), u.String())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	sq := q.(*sqlqueue.Queue)
	t.Cleanup(func() {
		if err := sq.DropTables(context.Background()); err != nil {
			t.Errorf("DropTables: %v", err)
		}
		if err := sq.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if sq.Dialect() != sqlqueue.MySQL {
		t.Fatalf("dialect %q, want mysql", sq.Dialect())
	}
	if err := queue.Dispatch(t.Context(), q, struct{ N int }{1}); err != nil {
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
	// A parameter neither sqlqueue nor the driver knows is refused here,
	// not sent to the server as a system variable.
	for extra, want := range map[string]string{"&tabel=x": `unknown URL parameter "tabel"`, "&pool_max_conns=0": "pool_max_conns must be a positive number"} {
		bad := u
		bad.RawQuery += extra
		if _, err := queue.Open(t.Context(), bad.String()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open with %s = %v, want an error saying %q", extra, err, want)
		}
	}
}
