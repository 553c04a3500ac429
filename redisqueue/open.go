package redisqueue

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/pushgroup"
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
// cluster=true opens a Redis Cluster named by the URL's one address (an
// addr= parameter without master_name= opens a Cluster too). push_lanes=N
// is WithPushLanes.
var URLParams = []string{"prefix", "setup", "cluster", "push_lanes"}

// redisParams are the parameters go-redis' ParseURL reads (v9.23.0).
var redisParams = []string{
	"client_name", "conn_max_idle_time", "conn_max_lifetime", "conn_max_lifetime_jitter", "db",
	"dial_timeout", "idle_timeout", "max_active_conns", "max_concurrent_dials", "max_conn_age",
	"max_idle_conns", "max_retries", "max_retry_backoff", "min_idle_conns", "min_retry_backoff",
	"pipeline_pool_size", "pipeline_read_buffer_size", "pipeline_write_buffer_size", "pool_fifo",
	"pool_size", "pool_timeout", "protocol", "read_timeout", "skip_verify", "write_timeout",
}

// clusterParams are the parameters go-redis' ParseClusterURL reads
// (v9.23.0): addr= names a further node, as often as needed.
var clusterParams = []string{
	"addr", "client_name", "conn_max_idle_time", "conn_max_lifetime", "conn_max_lifetime_jitter",
	"dial_timeout", "dialer_retries", "dialer_retry_timeout", "failing_timeout_seconds",
	"max_active_conns", "max_concurrent_dials", "max_idle_conns", "max_redirects", "max_retries",
	"max_retry_backoff", "min_idle_conns", "min_retry_backoff", "pipeline_pool_size",
	"pipeline_read_buffer_size", "pipeline_write_buffer_size", "pool_fifo", "pool_size",
	"pool_timeout", "protocol", "read_only", "read_timeout", "route_by_latency",
	"route_by_latency_tolerance", "route_randomly", "write_timeout",
}

// Open connects to the Redis server that rawURL names, in go-redis' URL
// form (redis://[user:password@]host:port/db?pool_size=20, rediss:// for
// TLS), or to a Redis Cluster in the form of go-redis' ParseClusterURL
// (redis://host:7000?addr=host:7001&addr=host:7002: an addr= parameter
// without master_name=, or cluster=true, makes it a Cluster; no database
// number), with prefix=NAME for WithPrefix (and setup=true|false, which
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
	failover := isFailover(params)
	cluster := !failover && params.Has("addr")
	if v, ok := params["cluster"]; ok {
		b, err := strconv.ParseBool(v[len(v)-1])
		if err != nil {
			return nil, fmt.Errorf("redisqueue: cluster=%q is not a boolean: %w", v[len(v)-1], queue.ErrConfig)
		}
		switch {
		case b && failover:
			return nil, fmt.Errorf("redisqueue: cluster=true with %s=, which names Sentinels: %w", FailoverParam, queue.ErrConfig)
		case !b && cluster:
			return nil, fmt.Errorf("redisqueue: cluster=false with addr= parameters, which name Cluster nodes: %w", queue.ErrConfig)
		}
		cluster = b
		params.Del("cluster")
	}
	known, kind := redisParams, "go-redis's"
	switch {
	case failover:
		known = failoverParams
	case cluster:
		known, kind = clusterParams, "go-redis's for a Cluster"
		if u.Path != "" && u.Path != "/" && u.Path != "/0" {
			return nil, fmt.Errorf("redisqueue: a Cluster has database 0 only, the URL names %q: %w", u.Path, queue.ErrConfig)
		}
	}
	for key := range params {
		if !slices.Contains(URLParams, key) && !slices.Contains(known, key) {
			return nil, fmt.Errorf("redisqueue: unknown URL parameter %q: redisqueue's are %s; %s are %s: %w",
				key, strings.Join(URLParams, ", "), kind, strings.Join(known, ", "), queue.ErrConfig)
		}
	}
	if p, ok := params["prefix"]; ok {
		opts = append([]Option{WithPrefix(p[len(p)-1])}, opts...)
		params.Del("prefix")
	}
	if v, ok := params["push_lanes"]; ok {
		n, err := pushgroup.ParseLanes(v[len(v)-1])
		if err != nil {
			return nil, fmt.Errorf("redisqueue: %w: %w", err, queue.ErrConfig)
		}
		opts = append([]Option{WithPushLanes(n)}, opts...)
		params.Del("push_lanes")
	}
	if v, ok := params["setup"]; ok {
		if _, err := strconv.ParseBool(v[len(v)-1]); err != nil {
			return nil, fmt.Errorf("redisqueue: setup=%q is not a boolean: %w", v[len(v)-1], queue.ErrConfig)
		}
		params.Del("setup")
	}
	rest := *u
	rest.RawQuery = params.Encode()
	if cluster {
		rest.Path = ""
		return openCluster(ctx, rest.String(), opts)
	}
	var rdb *redis.Client
	var server string
	if failover {
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

// openCluster is Open of a Cluster URL, its own parameters taken out.
func openCluster(ctx context.Context, rawURL string, opts []Option) (*Queue, error) {
	o, err := redis.ParseClusterURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisqueue: parsing the Cluster URL: %w (%w)", err, queue.ErrConfig)
	}
	o.ContextTimeoutEnabled = true
	rdb := redis.NewClusterClient(o)
	q, err := New(rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	q.ownsClient = true
	if err := rdb.Ping(ctx).Err(); err != nil {
		q.Close()
		return nil, wrap("connecting to the Cluster at "+strings.Join(o.Addrs, ","), err)
	}
	return q, nil
}

// open is the queue.Opener of redis:// and rediss:// URLs.
func open(ctx context.Context, u *url.URL) (queue.Queue, error) {
	return Open(ctx, u.String())
}
