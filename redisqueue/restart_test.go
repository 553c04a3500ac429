package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// privateRedis starts a redis-server of the test's own on a free port
// (freePort), with conf as its configuration
// arguments (default: keep nothing on disk). It returns the address and a
// restart that kills the server (SIGKILL, a crash) and starts it again on
// the same port and directory: empty, or with what its persistence kept.
func privateRedis(t *testing.T, conf ...string) (addr string, restart func()) {
	t.Helper()
	testutil.NeedPrograms(t, "the Redis restart test", "redis-server")
	port := freePort(t)
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	dir := t.TempDir()
	var cmd *exec.Cmd
	start := func() {
		if len(conf) == 0 {
			conf = []string{"--save", "", "--appendonly", "no"}
		}
		cmd = exec.Command("redis-server", append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir}, conf...)...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		// The server answering must be this one: between a kill and the
		// restart another test process may bind the port (its own private
		// server), and a test talking to that one would count its jobs
		// as lost. process_id tells them apart.
		pid := strconv.Itoa(cmd.Process.Pid)
		var other string
		answered := testutil.WaitFor(30*time.Second, func() bool {
			info, err := rdb.Info(t.Context(), "server").Result()
			if err != nil {
				return false
			}
			if got := infoField(info, "process_id"); got != pid {
				other = got
				return false
			}
			return true
		})
		if !answered {
			t.Fatalf("redis-server (pid %s) on %s did not answer within 30s; the port's server has pid %q (another process took the port while it restarted)", pid, addr, other)
		}
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	start()
	t.Cleanup(stop)
	return addr, func() { stop(); start() }
}

// TestWorkerRidesOutRestart kills the Redis server under a running
// Worker and starts it again: the Worker keeps running (a lost connection
// is no configuration error, and goleak finds no goroutine left behind by
// the broken subscription), and a job pushed after the restart runs.
func TestWorkerRidesOutRestart(t *testing.T) {
	t.Parallel()
	addr, restart := privateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	q := newQueue(t, rdb, "restart")
	ran := make(chan int, 4)
	w := queue.NewWorker(q).Poll(200 * time.Millisecond).Slog(slog.New(slog.DiscardHandler))
	queue.Handle(w, func(ctx context.Context, p ping) error { ran <- p.N; return nil })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	await := func(n int) {
		t.Helper()
		select {
		case got := <-ran:
			if got != n {
				t.Fatalf("ran job %d, want %d", got, n)
			}
		case err := <-done:
			t.Fatalf("Worker.Run returned %v before job %d ran", err, n)
		case <-time.After(20 * time.Second):
			t.Fatalf("job %d did not run within 20s", n)
		}
	}
	if err := queue.Dispatch(t.Context(), q, ping{1}); err != nil {
		t.Fatal(err)
	}
	await(1)
	restart()
	testutil.Eventually(t, 10*time.Second, func() bool { return queue.Dispatch(t.Context(), q, ping{2}) == nil },
		"no push succeeded after the restart")
	await(2)
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Worker.Run: %v", err)
	}
}

// infoField returns the value of field in an INFO reply ("" if absent).
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
