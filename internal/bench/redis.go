package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// Redis is a Redis server, or a Redis Cluster, as a Target: its queues are
// redisqueue Queues, each under a key prefix of its own (tablePrefix and a
// random suffix), whose keys are deleted afterwards. It reads the CPU and
// memory of the server, or of every master of the Cluster, from INFO, so
// it measures servers on another machine too.
//
// On a Cluster a queue's keys share one hash slot, so one queue is served
// by one master, one script at a time: only jobs spread over several
// queues (Options.Queues) spread over masters. SpreadQueues names queues
// whose slots fall on different masters.
type Redis struct {
	opts    *redis.Options        // a single server; nil for a Cluster
	cluster *redis.ClusterOptions // a Cluster; nil for a single server

	// PushLanes, when set, is redisqueue.WithPushLanes of each queue
	// (see SQL.PushLanes); nil keeps the default.
	PushLanes *int
}

// NewRedis is the Redis server that rawURL names, in go-redis' URL form
// (redis://host:port/db), or the Redis Cluster it names in the form of
// go-redis' ParseClusterURL, as redisqueue.Open reads it: an addr=
// parameter names a further node and makes it a Cluster, as cluster=true
// does for a URL of one node (redis://host:7000?addr=host:7001&addr=host:7002).
func NewRedis(rawURL string) (*Redis, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the Redis URL: %w", err)
	}
	params := u.Query()
	cluster := params.Has("addr")
	if params.Has("cluster") {
		if cluster, err = strconv.ParseBool(params.Get("cluster")); err != nil {
			return nil, fmt.Errorf("parsing the Redis URL: cluster=%q is not a boolean", params.Get("cluster"))
		}
		params.Del("cluster")
		u.RawQuery = params.Encode()
	}
	if cluster {
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return nil, fmt.Errorf("parsing the Redis Cluster URL: a Cluster has database 0 only, the URL names %q", u.Path)
		}
		u.Path = ""
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("parsing the Redis Cluster URL: %w", err)
		}
		o.ContextTimeoutEnabled = true
		return &Redis{cluster: o}, nil
	}
	o, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("parsing the Redis URL: %w", err)
	}
	o.ContextTimeoutEnabled = true
	return &Redis{opts: o}, nil
}

// Name returns "redis" for a single server and "rcluster" for a Cluster.
func (r *Redis) Name() string {
	if r.cluster != nil {
		return "rcluster"
	}
	return "redis"
}

// addrs names the server, or the Cluster's seed nodes, for messages.
func (r *Redis) addrs() string {
	if r.cluster != nil {
		return strings.Join(r.cluster.Addrs, ",")
	}
	return r.opts.Addr
}

// client returns a new client of r's server or Cluster with a pool of n
// connections (per node).
func (r *Redis) client(n int) redis.UniversalClient {
	if r.cluster != nil {
		o := *r.cluster
		if n > 0 {
			o.PoolSize = n
		}
		return redis.NewClusterClient(&o)
	}
	o := *r.opts
	if n > 0 {
		o.PoolSize = n
	}
	return redis.NewClient(&o)
}

// NewQueue returns a redisqueue Queue under a new unique prefix and a
// function that deletes the prefix's keys and closes the queue's client.
func (r *Redis) NewQueue(ctx context.Context) (queue.Queue, func(context.Context) error, error) {
	prefix := uniqueTable()
	rdb := r.client(0)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("connecting to Redis at %s: %w", r.addrs(), err)
	}
	opts := []redisqueue.Option{redisqueue.WithPrefix(prefix)}
	if r.PushLanes != nil {
		opts = append(opts, redisqueue.WithPushLanes(*r.PushLanes))
	}
	q, err := redisqueue.New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	drop := func(ctx context.Context) error {
		err := errors.Join(q.Close(), deleteKeys(ctx, rdb, "{"+prefix+"*"))
		return errors.Join(err, rdb.Close())
	}
	return q, drop, nil
}

// forEachNode calls fn with a client of the server, or of each master of
// the Cluster (at once, from goroutines of go-redis').
func forEachNode(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, c *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("bench: a Redis client of type %T", rdb)
}

// deleteKeys deletes every key matching pattern on the server or on every
// master, SCANning in pages. Each key is UNLINKed alone (pipelined): a
// Cluster node refuses one UNLINK of keys in several slots.
func deleteKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) error {
	return forEachNode(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return fmt.Errorf("listing the keys %s on %s: %w", pattern, c.Options().Addr, err)
			}
			if len(keys) > 0 {
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for _, k := range keys {
						p.Unlink(ctx, k)
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("deleting the keys %s on %s: %w", pattern, c.Options().Addr, err)
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
}

// Baseline measures single-key writes per second (an HSET of a new hash of
// two fields, a job-sized record) from conns clients for d, each waiting
// for its reply before the next, and deletes the keys afterwards. On a
// Cluster the keys spread over every slot, so over every master.
func (r *Redis) Baseline(ctx context.Context, conns int, d time.Duration) (float64, bool, error) {
	rdb := r.client(conns)
	defer rdb.Close()
	prefix := uniqueTable()
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conns)
	start := time.Now()
	deadline := start.Add(d)
	for c := range conns {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				key := prefix + ":" + strconv.Itoa(c) + ":" + strconv.Itoa(i)
				if err := rdb.HSet(ctx, key, "payload", `{"t":0}`, "state", "pending").Err(); err != nil {
					errs[c] = err
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := errors.Join(append(errs, deleteKeys(dctx, rdb, prefix+":*"))...); err != nil {
		return 0, true, fmt.Errorf("the Redis baseline: %w", err)
	}
	return float64(n.Load()) / el.Seconds(), true, nil
}

// BaselineName returns "1-key HSET".
func (r *Redis) BaselineName() string { return "1-key HSET" }

// nodesInfo returns the fields of one INFO section of the server, or of
// each master of the Cluster, by node address.
func (r *Redis) nodesInfo(ctx context.Context, section string) (map[string]map[string]string, error) {
	rdb := r.client(1)
	defer rdb.Close()
	var mu sync.Mutex
	out := map[string]map[string]string{}
	err := forEachNode(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		s, err := c.Info(ctx, section).Result()
		if err != nil {
			return fmt.Errorf("reading Redis INFO %s of %s: %w", section, c.Options().Addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		out[c.Options().Addr] = parseInfo(s)
		return nil
	})
	return out, err
}

// parseInfo reads the "field:value" lines of an INFO reply; section
// headers ("# CPU") and blank lines are skipped.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// sumFields returns, per node, the sum of fields of its INFO, parsed as
// numbers; a node missing one of them, or holding one that is not a
// number, is an error.
func sumFields(nodes map[string]map[string]string, fields ...string) (map[string]float64, error) {
	out := make(map[string]float64, len(nodes))
	for addr, m := range nodes {
		var total float64
		for _, k := range fields {
			v, err := strconv.ParseFloat(m[k], 64)
			if err != nil {
				return nil, fmt.Errorf("reading Redis INFO %s of %s: %q is not a number", k, addr, m[k])
			}
			total += v
		}
		out[addr] = total
	}
	return out, nil
}

// NodesCPU returns the CPU time each master (a single server: the server)
// reports it has used, by address (INFO cpu: used_cpu_user plus
// used_cpu_sys, every thread of the server).
func (r *Redis) NodesCPU() (map[string]time.Duration, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := r.nodesInfo(ctx, "cpu")
	if err != nil {
		return nil, false
	}
	secs, err := sumFields(nodes, "used_cpu_user", "used_cpu_sys")
	if err != nil {
		return nil, false
	}
	out := make(map[string]time.Duration, len(secs))
	for addr, s := range secs {
		out[addr] = time.Duration(s * float64(time.Second))
	}
	return out, true
}

// ServerCPU returns the CPU time of the server, or the sum over the
// Cluster's masters (see NodesCPU).
func (r *Redis) ServerCPU() (time.Duration, bool) {
	nodes, ok := r.NodesCPU()
	if !ok {
		return 0, false
	}
	var total time.Duration
	for _, d := range nodes {
		total += d
	}
	return total, true
}

// UsedMemory returns the memory Redis reports it holds for data and its
// own structures (INFO memory: used_memory), summed over a Cluster's
// masters. It is the whole server's: measure on a server nothing else
// writes to meanwhile.
func (r *Redis) UsedMemory(ctx context.Context) (uint64, error) {
	nodes, err := r.nodesInfo(ctx, "memory")
	if err != nil {
		return 0, err
	}
	sums, err := sumFields(nodes, "used_memory")
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, v := range sums {
		total += uint64(v)
	}
	return total, nil
}

// SpreadQueues names n queues of q, a queue NewQueue made, that fall on
// the masters of a Cluster as evenly as they can: the i-th on the i-th
// master (in address order) modulo their number. On a single server they
// are q0, q1, ... .
func (r *Redis) SpreadQueues(ctx context.Context, q queue.Queue, n int) ([]string, error) {
	rq, ok := q.(*redisqueue.Queue)
	if r.cluster == nil || !ok {
		return queueNames(n), nil
	}
	rdb := redis.NewClusterClient(r.cluster)
	defer rdb.Close()
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the Cluster's shards: %w", err)
	}
	owner := make([]string, slotCount)
	for _, sh := range shards {
		var master string
		for _, n := range sh.Nodes {
			if n.Role == "master" {
				master = n.IP + ":" + strconv.FormatInt(n.Port, 10)
			}
		}
		if master == "" {
			continue
		}
		for _, r := range sh.Slots {
			for i := max(r.Start, 0); i <= min(r.End, slotCount-1); i++ {
				owner[i] = master
			}
		}
	}
	return spreadNames(rq.Prefix(), n, owner)
}

// queueNames returns q0, q1, ... q<n-1>.
func queueNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "q" + strconv.Itoa(i)
	}
	return out
}

// spreadNames names n queues of prefix, of the form q<k>, the i-th of
// which falls on the i-th master (of the addresses in owner, sorted)
// modulo their number: owner[slot] is the master serving the slot, where
// a queue's slot is that of its hash tag (see package redisqueue, Keys).
func spreadNames(prefix string, n int, owner []string) ([]string, error) {
	var masters []string
	for _, a := range owner {
		if a != "" && !slices.Contains(masters, a) {
			masters = append(masters, a)
		}
	}
	if len(masters) == 0 {
		return nil, errors.New("bench: the Cluster has no master serving a slot")
	}
	slices.Sort(masters)
	out := make([]string, 0, n)
	used := map[string]bool{}
	for i := range n {
		want := masters[i%len(masters)]
		found := false
		for k := 0; k < 100*slotCount; k++ {
			name := "q" + strconv.Itoa(k)
			if used[name] || owner[keySlot(prefix+":"+name)] != want {
				continue
			}
			used[name], found = true, true
			out = append(out, name)
			break
		}
		if !found {
			return nil, fmt.Errorf("bench: no queue name found on the Cluster master %s", want)
		}
	}
	return out, nil
}

// slotCount is the number of a Redis Cluster's hash slots.
const slotCount = 16384

// keySlot returns the Cluster hash slot of a hash tag's content (or of a
// key without one): CRC16 (XMODEM) modulo 16384, as CLUSTER KEYSLOT.
func keySlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slotCount
}
