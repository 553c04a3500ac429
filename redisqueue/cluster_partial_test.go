package redisqueue_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestClusterReserveWithAMasterDown runs a multi-queue Reserve on a
// Cluster of its own (three masters, no replicas, serving their slots
// while another is down: cluster-require-full-coverage no) after
// SIGKILLing the master of one queue's slot: the Reserve leases the jobs
// of the queues whose masters answer, logs the failed queue, and fails
// only when every queue it names is on the dead master.
func TestClusterReserveWithAMasterDown(t *testing.T) {
	t.Parallel()
	const prefix = "rs-part"
	nodes := startClusterOf(t, 3, 0, "--cluster-require-full-coverage", "no")
	var addrs []string
	for a := range nodes {
		addrs = append(addrs, a)
	}
	ctx := t.Context()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: 500 * time.Millisecond, MaxRedirects: 1})
	defer cc.Close()
	var logs lockedBuffer
	q, err := redisqueue.New(cc, redisqueue.WithPrefix(prefix), redisqueue.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	// Queues on every master; the victim is q0's.
	var names []string
	masterOf := map[string]string{}
	for i := 0; len(names) < 6 || len(distinct(masterOf)) < 3; i++ {
		n := fmt.Sprintf("q%d", i)
		slot, err := cc.ClusterKeySlot(ctx, "{"+prefix+":"+n+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
		masterOf[n] = slotOwner(ctx, addrs[0], int(slot))
	}
	victim := masterOf["q0"]
	for _, n := range names {
		j, err := queue.NewJob(durWork{N: 1}, queue.OnQueue(n))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Push(ctx, j); err != nil {
			t.Fatalf("pushing to %s: %v", n, err)
		}
	}
	nodes[victim].kill()

	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	jobs, err := q.Reserve(rctx, names, 100, time.Minute)
	if err != nil {
		t.Fatalf("Reserve over %q with %s down: %v, want the other queues' jobs", names, victim, err)
	}
	got := map[string]bool{}
	for _, j := range jobs {
		got[j.Queue] = true
	}
	for _, n := range names {
		if want := masterOf[n] != victim; got[n] != want {
			t.Errorf("queue %s (on %s, down: %v): reserved %v, want %v", n, masterOf[n], !want, got[n], want)
		}
	}
	if !strings.Contains(logs.String(), "queue=q0") {
		t.Errorf("no warning naming queue q0 in the log:\n%s", logs.String())
	}

	var down []string
	for _, n := range names {
		if masterOf[n] == victim {
			down = append(down, n)
		}
	}
	if _, err := q.Reserve(rctx, down, 100, time.Minute); err == nil {
		t.Errorf("Reserve over %q, every one on the dead master: no error", down)
	}
}

// distinct returns the distinct values of m.
func distinct(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range m {
		out[v] = true
	}
	return out
}
