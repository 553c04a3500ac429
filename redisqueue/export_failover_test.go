package redisqueue

import (
	"net/url"

	"github.com/redis/go-redis/v9"
)

// FailoverOptions exposes failoverOptions to the tests: the options a
// Sentinel URL (its parameters already checked) gives the client.
func FailoverOptions(rawURL string) (*redis.FailoverOptions, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return failoverOptions(u)
}
