package memqueue

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/meridianjobs/meridian/internal/urlquery"

	"github.com/meridianjobs/meridian/queue"
)

func init() {
	queue.Register("memory", open)
}

// open is the Opener for memory:// URLs. Every call returns a new, empty
// queue: two Opens of the same URL share nothing. The optional query
// parameter retention sets WithRetention (memory://?retention=5000).
func open(_ context.Context, u *url.URL) (queue.Queue, error) {
	params, err := urlquery.Values(u)
	if err != nil {
		return nil, fmt.Errorf("memqueue: %w", err)
	}
	var opts []Option
	for key, vals := range params {
		switch key {
		case "retention":
			n, err := strconv.Atoi(vals[len(vals)-1])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("memqueue: retention must be a count of jobs, not %q", vals[len(vals)-1])
			}
			opts = append(opts, WithRetention(n))
		default:
			return nil, fmt.Errorf("memqueue: unknown URL parameter %q (known: retention)", key)
		}
	}
	return New(opts...), nil
}
