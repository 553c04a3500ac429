package redisqueue_test

import (
	"sync"
	"testing"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// TestContract runs the conformance suite against the Redis server of
// testutil.RedisEnv. Each check gets a prefix of its own (deleted when it
// ends); a peer is another client on the same prefix, as another process
// would open it.
func TestContract(t *testing.T) {
	rdb := client(t)
	var mu sync.Mutex
	prefixes := map[queue.Queue]string{}
	contracttest.Run(t, contracttest.Harness{
		New: func(t *testing.T) queue.Queue {
			p := prefix(t, rdb)
			q := newQueue(t, rdb, p)
			mu.Lock()
			prefixes[q] = p
			mu.Unlock()
			return q
		},
		Peer: func(t *testing.T, q queue.Queue) queue.Queue {
			mu.Lock()
			p := prefixes[q]
			mu.Unlock()
			return newQueue(t, client(t), p)
		},
		Caps: contracttest.Capabilities{
			NoDoneRetention:  "redisqueue deletes a job when it is done or cancelled",
			NoAttemptHistory: "redisqueue keeps no attempt history",
			NoFieldSearch:    "redisqueue's scripts search one substring of the payload",
		},
	})
}

var _ interface {
	queue.Queue
	driver.Waiter
	driver.Scheduler
	driver.Workflows
	driver.Graphs
	driver.Inspector
	driver.Reporter
	driver.Controller
	driver.Grouper
	driver.Sequencer
} = (*redisqueue.Queue)(nil)

// FuzzPushReserve runs the suite's fuzz target on one Queue of a prefix
// of its own; every go test replays the seeds and testdata/fuzz.
func FuzzPushReserve(f *testing.F) {
	rdb := client(f)
	q, err := redisqueue.New(rdb, redisqueue.WithPrefix(prefix(f, rdb)))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { q.Close() })
	contracttest.FuzzPushReserve(f, map[string]queue.Queue{"redis": q})
}
