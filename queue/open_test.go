package queue_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

func init() {
	// A driver whose queue cannot be closed: Open must refuse it.
	queue.Register("closeless-test", func(context.Context, *url.URL) (queue.Queue, error) {
		return plainQueue{memqueue.New()}, nil
	})
}

// TestOpenRefusesMalformedQuery checks that a query url.ParseQuery rejects
// never reaches a driver, which url.URL.Query would hand it without the
// bad parameter (table=staging;jobs opening meridian_jobs).
func TestOpenRefusesMalformedQuery(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		{"memory://?retention=5;6", `parameter "retention" contains a ";"`},
		{"memory://?retention=%zz", `parameter "retention" has an invalid %-escape`},
		{"query-test://x?table=staging;jobs", `parameter "table" contains a ";"`},
		{"query-test://x?a=1&table=staging;jobs&b=2", `parameter "table" contains a ";"`},
	}
	for _, tc := range tests {
		if _, err := queue.Open(t.Context(), tc.url); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", tc.url, err, tc.want)
		}
	}
	if q, err := queue.Open(t.Context(), "query-test://x?table=staging%3Bjobs"); err != nil {
		t.Errorf("Open with an escaped ';' = %v, want it accepted", err)
	} else {
		_ = q.Close()
	}
}

func init() {
	// A driver that opens whatever its URL says: it must never see a
	// query that url.ParseQuery rejects.
	queue.Register("query-test", func(_ context.Context, u *url.URL) (queue.Queue, error) {
		if _, err := url.ParseQuery(u.RawQuery); err != nil {
			return nil, fmt.Errorf("the driver got a malformed query %q", u.RawQuery)
		}
		return memqueue.New(), nil
	})
}

func TestOpenReturnsACloser(t *testing.T) {
	t.Parallel()
	q, err := queue.Open(t.Context(), "memory://")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil { // no type assertion needed
		t.Fatalf("Close = %v", err)
	}
	if _, err := queue.Open(t.Context(), "closeless-test://x"); err == nil || !strings.Contains(err.Error(), "no Close method") {
		t.Fatalf("Open of a driver without Close = %v, want an error naming it", err)
	}
}
