package redisqueue

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/urlquery"
	"github.com/meridianjobs/meridian/queue"
)

func init() {
	queue.Register("redis", open)
	queue.Register("rediss", open)
}

// URLParams are the parameters of a redis:// URL that redisqueue reads
// itself; the rest go to go-redis. setup is the SQL drivers' "create the
// tables at open": a Queue creates nothing at open either way (its keys
// appear as jobs are pushed), so setup=false and setup=true open alike, and
// a tool may add setup=false to any queue URL; it must be a boolean.
var URLParams = []string{"prefix", "setup"}

// redisParams are the parameters go-redis' ParseURL reads (v9.23.0).
var redisParams = []string{
	"client_name", "conn_max_idle_time", "conn_max_lifetime", "conn_max_lifetime_jitter", "db",
	"dial_timeout", "idle_timeout", "max_active_conns", "max_concurrent_dials", "max_conn_age",
	"max_idle_conns", "max_retries", "max_retry_backoff", "min_idle_conns", "min_retry_backoff",
	"pipeline_pool_size", "pipeline_read_buffer_size", "pipeline_write_buffer_size", "pool_fifo",
	"pool_size", "pool_timeout", "protocol", "read_timeout", "skip_verify", "write_timeout",
}

// Open connects to the Redis server that rawURL names, in go-redis' URL
// form (redis://[user:password@]host:port/db?pool_size=20, rediss:// for
// TLS), with prefix=NAME for WithPrefix (and setup=true|false, which
// changes nothing: see URLParams), and returns a Queue that owns
// its client: Close closes it. With master_name=NAME (FailoverParam) the
// URL names Sentinels instead, in go-redis' ParseFailoverURL form, and the
// client follows the primary through failovers. A parameter neither
// redisqueue nor go-redis reads is refused, naming it, and so are the
// failover parameters that would send commands to replicas. The server is
// pinged, so a wrong address or password fails here.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Queue, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisqueue: parsing the URL: %w", err)
	}
	params, err := urlquery.Values(u)
	if err != nil {
		return nil, fmt.Errorf("redisqueue: %w", err)
	}
	known := redisParams
	if isFailover(params) {
		known = failoverParams
	}
	for key := range params {
		if !slices.Contains(URLParams, key) && !slices.Contains(known, key) {
			return nil, fmt.Errorf("redisqueue: unknown URL parameter %q: redisqueue's are %s; go-redis's are %s: %w",
				key, strings.Join(URLParams, ", "), strings.Join(known, ", "), queue.ErrConfig)
		}
	}
	if p, ok := params["prefix"]; ok {
		opts = append([]Option{WithPrefix(p[len(p)-1])}, opts...)
		params.Del("prefix")
	}
	if v, ok := params["setup"]; ok {
		if _, err := strconv.ParseBool(v[len(v)-1]); err != nil {
			return nil, fmt.Errorf("redisqueue: setup=%q is not a boolean: %w", v[len(v)-1], queue.ErrConfig)
		}
		params.Del("setup")
	}
	rest := *u
	rest.RawQuery = params.Encode()
	var rdb *redis.Client
	var server string
	if isFailover(params) {
		o, err := failoverOptions(&rest)
		if err != nil {
			return nil, err
		}
		rdb = redis.NewFailoverClient(o)
		server = fmt.Sprintf("primary %q through Sentinel %s", o.MasterName, strings.Join(o.SentinelAddrs, ", "))
	} else {
		o, err := redis.ParseURL(rest.String())
		if err != nil {
			return nil, fmt.Errorf("redisqueue: parsing the URL: %w (%w)", err, queue.ErrConfig)
		}
		// The queue's calls honour their contexts' deadlines and
		// cancellation, not only the client's read and write timeouts.
		o.ContextTimeoutEnabled = true
		rdb = redis.NewClient(o)
		server = o.Addr
	}
	q, err := New(rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	q.ownsClient = true
	if err := rdb.Ping(ctx).Err(); err != nil {
		q.Close()
		return nil, wrap("connecting to "+server, err)
	}
	return q, nil
}

// open is the queue.Opener of redis:// and rediss:// URLs.
func open(ctx context.Context, u *url.URL) (queue.Queue, error) {
	return Open(ctx, u.String())
}
