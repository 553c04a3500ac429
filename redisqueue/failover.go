package redisqueue

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
)

// FailoverParam is the URL parameter that makes queue.Open connect
// through Redis Sentinel: master_name=NAME, the name Sentinel monitors the
// primary under (`sentinel monitor NAME ...`), as in go-redis'
// ParseFailoverURL. Such a URL names a Sentinel, not the primary:
//
//	redis://[user:password@]sentinel1:26379/0?master_name=mymaster&addr=sentinel2:26379&addr=sentinel3:26379
//
// Each addr=host:port adds a Sentinel; the URL's user and password are the
// Sentinels' (sentinel_username / sentinel_password in go-redis), and
// username= and password= are the primary's. The client asks the
// Sentinels for the primary, and after a failover for the promoted one.
const FailoverParam = "master_name"

// failoverParams are the parameters a Sentinel URL may carry besides
// URLParams: those of go-redis' ParseFailoverURL (v9.23.0) that leave
// every command on the primary. route_by_latency, route_randomly,
// replica_only and use_disconnected_replicas send commands to replicas,
// where a queue's scripts cannot write, and go-redis' NewFailoverClient
// refuses the first two: they are refused as unknown.
// context_timeout_enabled is refused too: Open always turns it on.
var failoverParams = []string{
	"addr", "client_name", "conn_max_idle_time", "conn_max_lifetime", "conn_max_lifetime_jitter", "db",
	"dial_timeout", "dialer_retries", "dialer_retry_timeout", FailoverParam, "max_active_conns",
	"max_concurrent_dials", "max_idle_conns", "max_retries", "max_retry_backoff", "min_idle_conns",
	"min_retry_backoff", "password", "pipeline_pool_size", "pipeline_read_buffer_size",
	"pipeline_write_buffer_size", "pool_fifo", "pool_size", "pool_timeout", "protocol", "read_timeout",
	"skip_verify", "username", "write_timeout",
}

// isFailover reports whether params select Sentinel.
func isFailover(params url.Values) bool { return params.Has(FailoverParam) }

// failoverOptions parses u, a URL whose query holds only go-redis'
// parameters (failoverParams), into the options of a failover client.
func failoverOptions(u *url.URL) (*redis.FailoverOptions, error) {
	if strings.TrimSpace(u.Query().Get(FailoverParam)) == "" {
		return nil, fmt.Errorf("redisqueue: %s is empty: name the primary as Sentinel monitors it: %w", FailoverParam, queue.ErrConfig)
	}
	o, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("redisqueue: parsing the Sentinel URL: %w (%w)", err, queue.ErrConfig)
	}
	o.ContextTimeoutEnabled = true
	return o, nil
}
