package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// Redis is a Redis server as a Target: its queues are redisqueue Queues,
// each under a key prefix of its own (tablePrefix and a random suffix),
// whose keys are deleted afterwards. It reads the server's CPU and memory
// from INFO, so it measures a server on another machine too.
type Redis struct {
	opts *redis.Options
}

// NewRedis is the Redis server that rawURL names, in go-redis' URL form
// (redis://host:port/db).
func NewRedis(rawURL string) (*Redis, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the Redis URL: %w", err)
	}
	o.ContextTimeoutEnabled = true
	return &Redis{opts: o}, nil
}

// Name returns "redis".
func (r *Redis) Name() string { return "redis" }

// client returns a new client of r's server with a pool of n connections.
func (r *Redis) client(n int) *redis.Client {
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
		return nil, nil, fmt.Errorf("connecting to Redis at %s: %w", r.opts.Addr, err)
	}
	q, err := redisqueue.New(rdb, redisqueue.WithPrefix(prefix))
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

// deleteKeys deletes every key matching pattern, SCANning in pages.
func deleteKeys(ctx context.Context, rdb *redis.Client, pattern string) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return fmt.Errorf("listing the keys %s: %w", pattern, err)
		}
		if len(keys) > 0 {
			if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("deleting the keys %s: %w", pattern, err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// Baseline measures single-key writes per second (an HSET of a new hash of
// two fields, a job-sized record) from conns clients for d, each waiting
// for its reply before the next, and deletes the keys afterwards.
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

// info returns the fields of one INFO section.
func (r *Redis) info(ctx context.Context, section string) (map[string]string, error) {
	rdb := r.client(1)
	defer rdb.Close()
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("reading Redis INFO %s: %w", section, err)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// ServerCPU returns the CPU time Redis reports it has used (INFO cpu:
// used_cpu_user plus used_cpu_sys, every thread of the server).
func (r *Redis) ServerCPU() (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := r.info(ctx, "cpu")
	if err != nil {
		return 0, false
	}
	var total float64
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(m[k], 64)
		if err != nil {
			return 0, false
		}
		total += v
	}
	return time.Duration(total * float64(time.Second)), true
}

// UsedMemory returns the memory Redis reports it holds for data and its
// own structures (INFO memory: used_memory). It is the whole server's:
// measure on a server nothing else writes to meanwhile.
func (r *Redis) UsedMemory(ctx context.Context) (uint64, error) {
	m, err := r.info(ctx, "memory")
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(m["used_memory"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading Redis used_memory %q: %w", m["used_memory"], err)
	}
	return v, nil
}
