package redisqueue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// killProof gives a job of a SIGKILL test more attempts than the test
// kills processes: a job whose attempt had started in a killed process is
// charged that attempt, and an unlucky one in flight at five kills would
// use up the default five and be dead-lettered, failing a check that is
// about the kills' other effects.
var killProof = queue.MaxAttempts(1000)

// startWorkers starts a batchworker process per entry of each, with env
// and then the entry as its environment; the test's end kills those
// still running.
func startWorkers(t *testing.T, bin string, env []string, each ...[]string) []*exec.Cmd {
	t.Helper()
	procs := make([]*exec.Cmd, len(each))
	for i, own := range each {
		c := exec.Command(bin)
		c.Env = append(slices.Clip(env), own...)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = c
	}
	t.Cleanup(func() {
		for _, c := range procs {
			_ = c.Process.Kill() // fails on one that was waited for
		}
	})
	return procs
}

// emptied reports, for testutil.KillRounds, whether every job was fed
// and queue name of q has none left.
func emptied(t *testing.T, q *redisqueue.Queue, name string, fed func() bool) func() bool {
	return func() bool {
		if !fed() {
			return false
		}
		l, err := q.Len(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		return l == 0
	}
}

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

// note is a group member of testdata/batchworker (same type name).
type note struct {
	Key string
	N   int
}

// TestGroupsSIGKILL pushes 300 group members (12 groups, queue "gm")
// while rounds of three worker processes gather and handle them (grace
// 100 ms, sets of at most 5), each process killing itself with SIGKILL
// at its 4th set: two inside the handler before the ack (the set runs
// again, whole: a duplicate run, counted apart) and one right after an
// ack; gathers run in every process at once and die with them. No member
// is ever in two different sets, a set that runs again holds the same
// members, every member runs, and nothing is left in the store.
func TestGroupsSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel()
	bin := buildBatchWorker(t)
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	const n, keys = 300, 12
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("u%d:%d", i%keys, i)
	}
	fed := testutil.Feed(t, n, func(ctx context.Context, i int) error {
		key := fmt.Sprintf("u%d", i%keys)
		return queue.Dispatch(ctx, q, note{key, i}, queue.OnQueue("gm"), queue.Group(key), killProof)
	})
	env := append(os.Environ(), "BATCHWORKER_ADDR="+testutil.DSN(t, testutil.RedisEnv), "BATCHWORKER_PREFIX="+p,
		"BATCHWORKER_KILL_AFTER_SETS=4")
	kills := testutil.KillRounds(t, 10*time.Minute, emptied(t, q, "gm", fed), func() []*exec.Cmd {
		return startWorkers(t, bin, env, []string{"BATCHWORKER_KILL_AT=ack"}, nil, nil)
	})
	lines, err := rdb.LRange(t.Context(), "{"+p+"}:test:sets", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var runs []testutil.GroupSet
	for _, l := range lines {
		if s, ok := testutil.ParseGroupSet(l); ok {
			runs = append(runs, s)
		}
	}
	extra := testutil.CheckGroupSets(t, runs, want, 5)
	if kills == 0 {
		t.Errorf("no process was killed: the test proved nothing")
	}
	t.Logf("%d members in %d sets over %d SIGKILLs; %d duplicate handler runs (a set run again after a kill before its ack)",
		n, len(runs)-extra, kills, extra)
}
