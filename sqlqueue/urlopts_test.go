package sqlqueue_test

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/sqlqueue"
)

func TestURLOptions(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		query   string
		setup   bool
		rest    string // what is left for the driver
		wantErr string // in URLOptions, or else in New applying the options
	}{
		{"", true, "", ""},
		{"table=jobs2&setup=false&sslmode=disable", false, "sslmode=disable", ""},
		{"visibility_timeout=30s&retention=24h&dead_retention=0s&maintenance=5m&worker_ttl=10m", true, "", ""},
		{"setup=maybe", false, "", "setup must be true or false"},
		{"retention=1day", false, "", "retention must be a duration"},
		{"retention=-1h", false, "", "retention must be zero or more"},
		{"maintenance=0s", false, "", "maintenance must be positive"},
		{"visibility_timeout=0s", false, "", "visibility timeout must be positive"},
		{"table=bad-name", false, "", "table name"},
		{"push_lanes=0&push_lanes=4", true, "", ""},
		{"push_lanes=two", false, "", "push_lanes must be a whole number"},
		{"push_lanes=-1", false, "", "want 0 to 1024"},
		{"push_lanes=1025", false, "", "want 0 to 1024"},
	} {
		v, _ := url.ParseQuery(tc.query)
		opts, setup, err := sqlqueue.URLOptions(v)
		if err == nil {
			_, err = sqlqueue.New(db, append(opts, sqlqueue.WithDialect(sqlqueue.SQLite))...)
		}
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one saying %q", tc.query, err, tc.wantErr)
			}
		case err != nil || setup != tc.setup || v.Encode() != tc.rest:
			t.Errorf("%q: setup %v, rest %q, err %v; want %v, %q", tc.query, setup, v.Encode(), err, tc.setup, tc.rest)
		}
	}
	v := url.Values{"sslmode": {"disable"}, "tabel": {"x"}}
	err = sqlqueue.CheckDriverParams(v, "pgx", []string{"sslmode"})
	if err == nil || !strings.Contains(err.Error(), `"tabel"`) || !strings.Contains(err.Error(), "visibility_timeout") {
		t.Errorf("CheckDriverParams with a typo = %v, want it named beside the known parameters", err)
	}
}
