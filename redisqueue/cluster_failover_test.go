package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// freeClusterPort is freePort for a Cluster node: its cluster bus port,
// the port plus 10000, must be free too.
func freeClusterPort(t *testing.T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	first, last := 20000, 29999
	if r := os.Getenv(portsEnv); r != "" {
		if _, err := fmt.Sscanf(r, "%d-%d", &first, &last); err != nil || first < 1 || last > 55535 || first > last {
			t.Fatalf("%s=%q: want FIRST-LAST, e.g. 7100-7199, with LAST+10000 a port", portsEnv, r)
		}
	}
	free := func(p int) bool {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		l.Close()
		return true
	}
	for range 200 {
		p := first + rand.IntN(last-first+1)
		if handedOut.ports[p] || !free(p) || !free(p+10000) {
			continue
		}
		handedOut.ports[p] = true
		return p
	}
	t.Fatalf("no free port with its bus port in %d-%d", first, last)
	return 0
}

// startCluster starts a Redis Cluster of the test's own, as
// .ci/redis-cluster does: six nodes on free loopback ports
// (--cluster-node-timeout 2000, no persistence) joined by redis-cli
// --cluster create with one replica per master. It returns the nodes by
// address; each is SIGKILLed when the test ends, and its files go with
// t.TempDir.
func startCluster(t *testing.T) map[string]*redisProc {
	t.Helper()
	return startClusterOf(t, 3, 1)
}

// startClusterOf is startCluster with masters masters of replicas
// replicas each, every node started with the redis-server arguments extra
// too.
func startClusterOf(t *testing.T, masters, replicas int, extra ...string) map[string]*redisProc {
	t.Helper()
	testutil.NeedPrograms(t, "the Cluster tests of their own", "redis-server", "redis-cli")
	nodes := map[string]*redisProc{}
	var addrs []string
	for range masters * (1 + replicas) {
		port := freeClusterPort(t)
		dir := t.TempDir()
		p := &redisProc{addr: "127.0.0.1:" + strconv.Itoa(port)}
		p.cmd = exec.Command("redis-server", append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no"}, extra...)...)
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		t.Cleanup(p.kill)
		nodes[p.addr] = p
		addrs = append(addrs, p.addr)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		testutil.Eventually(t, 30*time.Second, func() bool { return c.Ping(t.Context()).Err() == nil },
			"redis-server on %s did not answer", a)
		c.Close()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	testutil.RunCmd(t, "redis-cli", append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")...)
	for _, a := range addrs {
		// Every node sees the cluster whole, and every replica has synced
		// with its master: a replica that never did cannot be promoted.
		c := redis.NewClient(&redis.Options{Addr: a})
		testutil.Eventually(t, 30*time.Second, func() bool {
			info, err := c.ClusterInfo(t.Context()).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			repl, err := c.Info(t.Context(), "replication").Result()
			return err == nil && (strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up"))
		}, "the node on %s did not reach cluster_state:ok with its replication up", a)
		c.Close()
	}
	return nodes
}

// slotOwner asks the node at addr which master serves slot, "" when
// none does or the node does not answer.
func slotOwner(ctx context.Context, addr string, slot int) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return ""
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start > int64(slot) || int64(slot) > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" && n.Health == "online" {
					return fmt.Sprintf("%s:%d", n.IP, n.Port)
				}
			}
		}
	}
	return ""
}

// TestClusterFailover runs a Worker over six queues spread over the three
// masters of a Cluster of its own while jobs are pushed round-robin, one
// every 5 ms, SIGKILLs the master of one queue's slot and lets the
// Cluster promote its replica. The Worker rides it out (no error from
// Run, no goroutine left behind: goleak runs after the tests), work goes
// on on every queue, and no acknowledged job stays waiting past its
// lease. It counts, among the pushes acknowledged, the jobs lost (never
// run and gone) and run twice, and holds the lost ones to docs/drivers.md's
// bound for asynchronous replication: only writes acknowledged in the
// last moment before the crash, not yet sent to the replica, may be lost.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	const (
		lease      = 2 * time.Second
		lossWindow = time.Second
		prefix     = "cfo"
	)
	nodes := startCluster(t)
	var addrs []string
	for a := range nodes {
		addrs = append(addrs, a)
	}
	v := "prefix=" + prefix + "&dial_timeout=1s"
	for _, a := range addrs[1:] {
		v += "&addr=" + a
	}
	u := fmt.Sprintf("redis://%s?%s", addrs[0], v)
	qq, err := queue.Open(t.Context(), u)
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	defer qq.Close()
	q := qq.(*redisqueue.Queue)

	names := []string{"q0", "q1", "q2", "q3", "q4", "q5"}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	slot, err := cc.ClusterKeySlot(t.Context(), "{"+prefix+":q0}").Result()
	if err != nil {
		t.Fatal(err)
	}
	victim := slotOwner(t.Context(), addrs[0], int(slot))
	if nodes[victim] == nil {
		t.Fatalf("the master of slot %d is %q, not a node of the test", slot, victim)
	}
	masters := map[string]bool{}
	for _, n := range names {
		s, err := cc.ClusterKeySlot(t.Context(), "{"+prefix+":"+n+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		masters[slotOwner(t.Context(), addrs[0], int(s))] = true
	}

	var mu sync.Mutex
	starts, ends := map[string]int{}, map[string]int{}
	w := queue.NewWorker(q).Queues(names...).Concurrency(8).Poll(50 * time.Millisecond).Lease(lease).Slog(slog.New(slog.DiscardHandler))
	queue.Handle(w, func(ctx context.Context, _ durWork) error {
		j, _ := queue.JobFromContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		starts[j.ID]++
		ends[j.ID]++
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	acked := map[string]time.Time{}
	queueOf := map[string]string{}
	failed := 0
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			j, err := queue.NewJob(durWork{N: n}, queue.OnQueue(names[n%len(names)]))
			if err != nil {
				t.Error(err)
				return
			}
			pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
			err = q.Push(pctx, j)
			pcancel()
			mu.Lock()
			if err == nil {
				acked[j.ID] = time.Now()
				queueOf[j.ID] = j.Queue
			} else {
				failed++
			}
			mu.Unlock()
		}
	}()
	ended := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(ends) >= n
		}
	}
	if !testutil.WaitFor(30*time.Second, ended(200)) {
		t.Fatal("the Worker did not finish 200 jobs")
	}
	var survivor string
	for _, a := range addrs {
		if a != victim {
			survivor = a
			break
		}
	}
	crash := time.Now()
	nodes[victim].kill()
	promotedTo := ""
	if !testutil.WaitFor(30*time.Second, func() bool {
		promotedTo = slotOwner(t.Context(), survivor, int(slot))
		return promotedTo != "" && promotedTo != victim
	}) {
		t.Fatalf("the Cluster did not promote a replica of %s within 30s", victim)
	}
	promoted := time.Since(crash)
	mu.Lock()
	after := len(ends)
	mu.Unlock()
	if !testutil.WaitFor(30*time.Second, ended(after+300)) {
		t.Fatal("the Worker did not go on after the failover")
	}
	close(stop)
	<-produced
	select {
	case err := <-done:
		t.Fatalf("Worker.Run returned %v during the failover", err)
	default:
	}

	lost := settleAcked(t, q, 3*lease+10*time.Second, func() []string {
		mu.Lock()
		defer mu.Unlock()
		var ids []string
		for id := range acked {
			if ends[id] == 0 {
				ids = append(ids, id)
			}
		}
		return ids
	})
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Worker.Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	twice, onVictim := 0, 0
	for id := range acked {
		if starts[id] > 1 {
			twice++
		}
	}
	for id, at := range acked {
		if queueOf[id] == "q0" && at.After(crash) {
			onVictim++
		}
	}
	t.Logf("Cluster failover (%d masters hold the 6 queues): %s's replica %s promoted %s after its master's SIGKILL; %d pushes acknowledged (%d to q0 after the kill), %d failed during the failover, %d lost, %d run more than once",
		len(masters), victim, promotedTo, promoted.Round(10*time.Millisecond), len(acked), onVictim, failed, len(lost), twice)
	for _, id := range lost {
		if d := crash.Sub(acked[id]); d > lossWindow {
			t.Errorf("job %s, acknowledged %s before the crash, was lost: asynchronous replication loses only the last moment's writes", id, d.Round(time.Millisecond))
		}
	}
}
