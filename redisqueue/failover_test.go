package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// TestOpenSentinelRefuses checks what queue.Open refuses in a Sentinel
// URL (one with master_name) before it connects.
func TestOpenSentinelRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, want string
	}{
		{"empty master", "redis://127.0.0.1:1/0?master_name=", "master_name is empty"},
		{"reads from replicas", "redis://127.0.0.1:1/0?master_name=m&replica_only=true", `unknown URL parameter "replica_only"`},
		{"random routing", "redis://127.0.0.1:1/0?master_name=m&route_randomly=true", `unknown URL parameter "route_randomly"`},
		{"latency routing", "redis://127.0.0.1:1/0?master_name=m&route_by_latency=true", `unknown URL parameter "route_by_latency"`},
		{"disconnected replicas", "redis://127.0.0.1:1/0?master_name=m&use_disconnected_replicas=true", `unknown URL parameter "use_disconnected_replicas"`},
		{"context timeouts are always on", "redis://127.0.0.1:1/0?master_name=m&context_timeout_enabled=false", `unknown URL parameter "context_timeout_enabled"`},
		{"standalone-only parameter", "redis://127.0.0.1:1/0?master_name=m&idle_timeout=1s", `unknown URL parameter "idle_timeout"`},
		{"misspelt", "redis://127.0.0.1:1/0?master_name=m&sentinel_master=m", `unknown URL parameter "sentinel_master"`},
		{"bad addr", "redis://127.0.0.1:1/0?master_name=m&addr=nohost", "unable to parse addr"},
		{"bad db", "redis://127.0.0.1:1/x?master_name=m", "invalid database number"},
		{"bad duration", "redis://127.0.0.1:1/0?master_name=m&dial_timeout=soon", "dial_timeout"},
		{"bad prefix", "redis://127.0.0.1:1/0?master_name=m&prefix=a:b", "letters, digits"},
		{"unreachable", "redis://127.0.0.1:1/0?master_name=m&dial_timeout=1s", `primary "m" through Sentinel 127.0.0.1:1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := queue.Open(t.Context(), tc.url)
			if err == nil {
				q.Close()
				t.Fatalf("Open(%q) succeeded, want it refused", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, queue.ErrConfig) && tc.name != "unreachable" {
				t.Fatalf("Open(%q) = %v, want an error matching ErrConfig containing %q", tc.url, err, tc.want)
			}
		})
	}
}

// TestFailoverOptions checks how a Sentinel URL maps to go-redis'
// FailoverOptions: the host and each addr are Sentinels, the URL's user
// and password the Sentinels', username= and password= the primary's.
func TestFailoverOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		want redis.FailoverOptions
		tls  bool
	}{
		{
			url:  "redis://127.0.0.1:26379/0?master_name=mymaster",
			want: redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"127.0.0.1:26379"}},
		},
		{
			url: "redis://su:sp@s1:26379/3?master_name=m&addr=s2:26380&addr=s3:26381&username=app&password=pw&pool_size=4&dial_timeout=2s",
			want: redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"s1:26379", "s2:26380", "s3:26381"},
				SentinelUsername: "su", SentinelPassword: "sp", Username: "app", Password: "pw", DB: 3, PoolSize: 4, DialTimeout: 2 * time.Second},
		},
		{
			url:  "rediss://s1:26379?master_name=m&db=2&max_retries=-1",
			want: redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"s1:26379"}, DB: 2, MaxRetries: -1},
			tls:  true,
		},
	}
	for _, tc := range tests {
		o, err := redisqueue.FailoverOptions(tc.url)
		if err != nil {
			t.Errorf("FailoverOptions(%q): %v", tc.url, err)
			continue
		}
		got := redis.FailoverOptions{MasterName: o.MasterName, SentinelAddrs: o.SentinelAddrs,
			SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword, Username: o.Username,
			Password: o.Password, DB: o.DB, PoolSize: o.PoolSize, DialTimeout: o.DialTimeout, MaxRetries: o.MaxRetries}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("FailoverOptions(%q) =\n%+v, want\n%+v", tc.url, got, tc.want)
		}
		if (o.TLSConfig != nil) != tc.tls {
			t.Errorf("FailoverOptions(%q): TLS %v, want %v", tc.url, o.TLSConfig != nil, tc.tls)
		}
		if !o.ContextTimeoutEnabled {
			t.Errorf("FailoverOptions(%q): ContextTimeoutEnabled false, want true", tc.url)
		}
	}
}

// redisProc is a redis-server (or Sentinel) process of the test's own.
type redisProc struct {
	cmd  *exec.Cmd
	addr string
}

// startRedis starts redis-server with args on a free loopback port,
// waits until it answers and stops it (SIGKILL) when the test ends.
func startRedis(t *testing.T, args ...string) *redisProc {
	t.Helper()
	port := freePort(t)
	p := &redisProc{addr: "127.0.0.1:" + strconv.Itoa(port)}
	args = append(args, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", t.TempDir(), "--save", "", "--appendonly", "no")
	p.cmd = exec.Command("redis-server", args...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(p.kill)
	rdb := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
	defer rdb.Close()
	testutil.Eventually(t, 30*time.Second, func() bool { return rdb.Ping(t.Context()).Err() == nil },
		"redis-server on %s did not answer", p.addr)
	return p
}

// kill SIGKILLs the process (a crash) and reaps it; a second kill does
// nothing.
func (p *redisProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
}

// TestFailover runs a Worker on a Queue opened by a Sentinel URL while
// jobs are pushed one by one, SIGKILLs the primary and lets Sentinel
// promote the replica. The Worker rides it out (no error from Run, no
// goroutine left behind: goleak runs after the tests), work goes on on the
// new primary, the wake-up subscription moves there, and no acknowledged
// job stays waiting past its lease. It
// counts, among the pushes acknowledged, the jobs lost (never run and gone
// from the new primary) and run twice, and holds the lost ones to
// docs/drivers.md's bound for asynchronous replication: only writes
// acknowledged in the last moment before the crash, not yet sent to the
// replica, may be lost.
func TestFailover(t *testing.T) {
	t.Parallel()
	testutil.NeedPrograms(t, "the Sentinel failover test", "redis-server")
	const (
		master = "fotest"
		lease  = 2 * time.Second
		// lossWindow bounds how long before the crash a lost push may
		// have been acknowledged: replication to a replica on loopback
		// lags by well under this.
		lossWindow = time.Second
	)
	primary := startRedis(t)
	replica := startRedis(t, "--replicaof", strings.Replace(primary.addr, ":", " ", 1))
	rrep := redis.NewClient(&redis.Options{Addr: replica.addr})
	defer rrep.Close()
	testutil.Eventually(t, 30*time.Second, func() bool {
		info, err := rrep.Info(t.Context(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, "the replica on %s did not sync with %s", replica.addr, primary.addr)

	host, port, _ := strings.Cut(primary.addr, ":")
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`sentinel monitor %[1]s %[2]s %[3]s 1
sentinel down-after-milliseconds %[1]s 500
sentinel failover-timeout %[1]s 3000
sentinel parallel-syncs %[1]s 1
`, master, host, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinel := startRedis(t, conf, "--sentinel")
	rsen := redis.NewSentinelClient(&redis.Options{Addr: sentinel.addr})
	defer rsen.Close()
	testutil.Eventually(t, 30*time.Second, func() bool {
		replicas, err := rsen.Replicas(t.Context(), master).Result()
		return err == nil && len(replicas) == 1 && fmt.Sprint(replicas[0]["flags"]) == "slave"
	}, "Sentinel did not find the replica")
	primaryAddr := func() string {
		a, err := rsen.GetMasterAddrByName(t.Context(), master).Result()
		if err != nil {
			return ""
		}
		return strings.Join(a, ":")
	}

	u := fmt.Sprintf("redis://%s/0?master_name=%s&prefix=fo&dial_timeout=1s", sentinel.addr, master)
	qq, err := queue.Open(t.Context(), u)
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	defer qq.Close()
	q := qq.(*redisqueue.Queue)

	var mu sync.Mutex
	starts, ends := map[string]int{}, map[string]int{}
	w := queue.NewWorker(q).Concurrency(8).Poll(50 * time.Millisecond).Lease(lease).Slog(slog.New(slog.DiscardHandler))
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

	// The producer pushes a job every 5 ms and notes when each push was
	// acknowledged; a push that failed may still have been stored, and is
	// left out of the count.
	acked := map[string]time.Time{}
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
			j, err := queue.NewJob(durWork{N: n})
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
	crash := time.Now()
	primary.kill()
	if !testutil.WaitFor(30*time.Second, func() bool { return primaryAddr() == replica.addr }) {
		t.Fatalf("Sentinel did not promote the replica within 30s (primary: %q)", primaryAddr())
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
	// The wake-up subscription moved to the new primary too (the Worker
	// polls as well, so the work going on does not show it).
	rnew := redis.NewClient(&redis.Options{Addr: replica.addr})
	defer rnew.Close()
	testutil.Eventually(t, 10*time.Second, func() bool {
		n, err := rnew.PubSubNumSub(t.Context(), "{fo}:wake").Result()
		return err == nil && n["{fo}:wake"] > 0
	}, "no subscriber of {fo}:wake on the promoted primary")
	select {
	case err := <-done:
		t.Fatalf("Worker.Run returned %v during the failover", err)
	default:
	}

	// Every acknowledged job ends or is found gone; one still in the store
	// after its lease and a retry's worth is stuck.
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
	twice := 0
	for id := range acked {
		if starts[id] > 1 {
			twice++
		}
	}
	t.Logf("Sentinel failover: replica promoted %s after the primary's SIGKILL; %d pushes acknowledged, %d failed during the failover, %d lost, %d run more than once",
		promoted.Round(10*time.Millisecond), len(acked), failed, len(lost), twice)
	for _, id := range lost {
		if d := crash.Sub(acked[id]); d > lossWindow {
			t.Errorf("job %s, acknowledged %s before the crash, was lost: asynchronous replication loses only the last moment's writes", id, d.Round(time.Millisecond))
		}
	}
}
