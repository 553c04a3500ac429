package queue_test

import (
	"context"
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
