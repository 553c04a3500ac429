package redisqueue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/pushgroup"
	"github.com/meridianjobs/meridian/queue"
)

// DefaultPrefix is the key prefix a Queue uses unless WithPrefix names
// another.
const DefaultPrefix = "meridian"

// Queue is a queue.Queue over Redis. It is safe for concurrent use by many
// goroutines and many processes sharing one Redis and one prefix.
type Queue struct {
	rdb    redis.UniversalClient
	prefix string
	log    *slog.Logger

	ids, queues, wake string // the global keys and the wake-up channel

	ownsClient bool // Close closes rdb (queue.Open's queues)

	// cluster is set for a *redis.ClusterClient: every script then touches
	// the keys of one slot only (cluster.go).
	cluster bool

	waker  waker
	report reporter // run metrics not yet written (report.go)

	batchSweep // batch events left by a process that stopped (batch.go)

	lanes int             // WithPushLanes
	group pushgroup.Group // Push's coalescing (push.go)

	closeOnce sync.Once
}

// Option configures a Queue.
type Option func(*Queue) error

// WithPrefix sets the prefix of every key the Queue reads and writes
// (default DefaultPrefix), so that several applications, or tests, share
// one Redis without seeing each other's jobs. It is 1 to 64 ASCII letters,
// digits, "_", "." or "-": no ":" or braces, so that the keys of two
// prefixes never meet and every key's hash tag is what docs/drivers.md
// says.
func WithPrefix(p string) Option {
	return func(q *Queue) error {
		if !validPrefix(p) {
			return fmt.Errorf("redisqueue: prefix %q must be 1 to 64 letters, digits, _, . or -: %w", p, queue.ErrConfig)
		}
		q.prefix = p
		return nil
	}
}

func validPrefix(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// WithLogger sets where the Queue logs what it does not return (a lost
// wake-up subscription). The default discards.
func WithLogger(l *slog.Logger) Option {
	return func(q *Queue) error {
		if l != nil {
			q.log = l
		}
		return nil
	}
}

// DefaultPushLanes is the push lanes of a Queue without WithPushLanes:
// more than the SQL stores', as a Redis round trip is short and the
// client's share of a push the larger (docs/benchmarks-history.md, run AS).
const DefaultPushLanes = 4

// WithPushLanes sets how many single pushes (Push, so Dispatch) of the
// Queue run on their own at once; a Push arriving while that many run
// waits, and the Pushes waiting when a lane frees go to Redis together as
// one script call, each answered as if it had run alone (a duplicate
// gets its *driver.DuplicateError). At a low rate nothing waits; from many
// goroutines at a high rate the server's work per job falls. 0 runs every
// Push on its own; n must be 0 to 1024 (as on the SQL stores). Default
// DefaultPushLanes.
func WithPushLanes(n int) Option {
	return func(q *Queue) error {
		if err := pushgroup.CheckLanes(n); err != nil {
			return fmt.Errorf("redisqueue: WithPushLanes: %w: %w", err, queue.ErrConfig)
		}
		q.lanes = n
		return nil
	}
}

// New returns a Queue over rdb, the client the program already has (a
// *redis.Client of a standalone server or of a Sentinel failover). It does
// no I/O: the keys are created as jobs are pushed. Close releases only
// what the Queue started (its wake-up subscription); the client stays the
// caller's.
//
// A *redis.ClusterClient is a Redis Cluster: every script then touches
// one hash slot, and a job's ID is unique within its queue rather than
// across queues (docs/drivers.md, "Redis Cluster"); New adds a hook to
// that client (once) that reloads its map of slots when a node fails to
// answer, so that a failover is followed in well under a second, not at
// go-redis' next periodic reload. A *redis.Ring is
// refused with an error matching queue.ErrConfig: it shards by key on
// the client, so a queue's keys could not be read together.
func New(rdb redis.UniversalClient, opts ...Option) (*Queue, error) {
	var cluster bool
	switch c := rdb.(type) {
	case nil:
		return nil, fmt.Errorf("redisqueue: New with a nil client: %w", queue.ErrConfig)
	case *redis.Ring:
		return nil, fmt.Errorf("redisqueue: %T is not supported: use a standalone, Sentinel or Cluster client: %w", rdb, queue.ErrConfig)
	case *redis.ClusterClient:
		cluster = true
		hookReload(c)
	}
	q := &Queue{rdb: rdb, prefix: DefaultPrefix, log: slog.New(slog.DiscardHandler), cluster: cluster, lanes: DefaultPushLanes}
	q.group.Name = "redisqueue"
	for _, o := range opts {
		if err := o(q); err != nil {
			return nil, err
		}
	}
	g := "{" + q.prefix + "}"
	q.ids, q.queues, q.wake = g+":ids", g+":queues", g+":wake"
	q.batchSweep.init(g)
	q.waker.q = q
	return q, nil
}

// Close writes the buffered run metrics (see ObserveRun), stops the
// Queue's wake-up subscription and, for a Queue that queue.Open opened,
// closes its client. Calls after Close fail.
func (q *Queue) Close() error {
	var err error
	q.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		q.group.Wait()
		q.flushMetricsLogged(ctx)
		cancel()
		q.waker.close()
		if q.ownsClient {
			err = q.rdb.Close()
		}
	})
	return err
}

// Prefix returns the Queue's key prefix.
func (q *Queue) Prefix() string { return q.prefix }

// base returns the hash-tagged base of queue name's keys: {prefix:name},
// with "%", "{" and "}" of name escaped, so that the tag is the whole name
// and two names never share a key.
func (q *Queue) base(name string) string {
	if name == "" {
		name = queue.DefaultQueue
	}
	var b strings.Builder
	b.Grow(len(q.prefix) + len(name) + 3)
	b.WriteByte('{')
	b.WriteString(q.prefix)
	b.WriteByte(':')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// wrap wraps err once with what was being done. Errors Redis answers that
// retrying cannot fix (authentication, permissions, a script Redis
// refuses) are marked with queue.ErrConfig; ctx errors stay matchable.
func wrap(doing string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, p := range []string{"NOAUTH", "WRONGPASS", "NOPERM", "ERR Error compiling script", "ERR user_script", "CROSSSLOT"} {
		if strings.HasPrefix(msg, p) {
			return fmt.Errorf("redisqueue: %s: %w (%w)", doing, err, queue.ErrConfig)
		}
	}
	return fmt.Errorf("redisqueue: %s: %w", doing, err)
}

// ctxErr returns ctx's error wrapped with doing, or nil.
func ctxErr(ctx context.Context, doing string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisqueue: %s: %w", doing, err)
	}
	return nil
}

// keyset collects the keys of one script call: the fixed ones first, then
// each queue base once, referred to by its index in KEYS (from 1, as Lua
// counts).
type keyset struct {
	keys  []string
	index map[string]int
}

func newKeyset(fixed ...string) *keyset {
	return &keyset{keys: fixed, index: map[string]int{}}
}

// of returns the Lua index of base, adding it.
func (k *keyset) of(base string) int {
	if i, ok := k.index[base]; ok {
		return i
	}
	k.keys = append(k.keys, base)
	k.index[base] = len(k.keys)
	return len(k.keys)
}
