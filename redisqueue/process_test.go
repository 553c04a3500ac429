package redisqueue_test

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// buildBatchWorker builds testdata/batchworker into t's temporary
// directory.
func buildBatchWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "batchworker")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/batchworker").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/batchworker: %v\n%s", err, out)
	}
	return bin
}

// TestBatchSIGKILL runs a batch of 1,000 members on three worker
// processes while the test SIGKILLs one of them, at a random moment,
// every 100 to 300 ms until the batch has finished, starting another in
// its place: kills land between the steps of the batch protocol as they
// come. The
// batch must end with every member counted done once and then and finally
// pushed once each (a callback may run twice, after a kill, but with one
// CreatedAt: one push).
func TestBatchSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel()
	bin := buildBatchWorker(t)
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	const n = 1000
	id, err := queue.DispatchBatch(t.Context(), q, protoBatch(t, n))
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "BATCHWORKER_ADDR="+testutil.DSN(t, testutil.RedisEnv), "BATCHWORKER_PREFIX="+p)
	var (
		mu    sync.Mutex
		procs []*exec.Cmd
	)
	start := func() *exec.Cmd {
		c := exec.Command(bin)
		c.Env = env
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		procs = append(procs, c)
		mu.Unlock()
		return c
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range procs {
			if c.ProcessState == nil {
				c.Process.Signal(syscall.SIGTERM)
				c.Wait()
			}
		}
	})
	live := []*exec.Cmd{start(), start(), start()}
	kills := 0
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
		if in, err := q.GetBatch(t.Context(), id); err == nil && in.Finished() {
			break
		}
		i := rand.IntN(len(live))
		live[i].Process.Kill()
		live[i].Wait()
		kills++
		live[i] = start()
	}
	if kills == 0 {
		t.Fatal("the batch finished before the first kill: nothing was tested")
	}
	testutil.Eventually(t, 2*time.Minute, func() bool {
		in, err := q.GetBatch(t.Context(), id)
		if err != nil || !in.Finished() {
			return false
		}
		l, err := q.Len(t.Context(), "")
		return err == nil && l == 0 && outbox(t, q, "bm") == 0
	}, "the batch to finish and the queues to drain")
	in := getInfo(t, q, id)
	wantCounts(t, "at the end", in, 0, n, 0, 0)
	handled, err := rdb.LRange(t.Context(), "{"+p+"}:test:handled", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]int{}
	pushes := map[string]map[string]bool{}
	for _, h := range handled {
		if ev, created, ok := strings.Cut(strings.TrimPrefix(h, "cb:"), ":"); ok && strings.HasPrefix(h, "cb:") {
			if pushes[ev] == nil {
				pushes[ev] = map[string]bool{}
			}
			pushes[ev][created] = true
			continue
		}
		members[h]++
	}
	if len(members) != n {
		t.Errorf("%d members handled, want %d", len(members), n)
	}
	if len(pushes["then"]) != 1 || len(pushes["finally"]) != 1 || len(pushes["catch"]) != 0 {
		t.Errorf("callbacks pushed %v (by CreatedAt), want then and finally once each", pushes)
	}
	again := 0
	for _, c := range members {
		again += c - 1
	}
	t.Logf("%d kills; %d member handlings repeated after a kill", kills, again)
}
