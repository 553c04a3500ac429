package redisqueue_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// durWork is testdata/faultworker's job type, by name.
type durWork struct {
	N int `json:"n"`
}

func (durWork) JobName() string { return "Work" }

var (
	faultOnce sync.Once
	faultBin  string
	faultErr  error
)

// removeFaultWorker deletes the directory of the faultworker binary, if
// a test built one; TestMain calls it after the tests.
func removeFaultWorker() {
	if faultBin != "" {
		os.RemoveAll(filepath.Dir(faultBin))
	}
}

// buildFaultWorker builds testdata/faultworker once per test binary.
func buildFaultWorker(t *testing.T) string {
	t.Helper()
	faultOnce.Do(func() {
		dir, err := os.MkdirTemp("", "redisqueue-faultworker")
		if err != nil {
			faultErr = err
			return
		}
		bin := filepath.Join(dir, "faultworker")
		if out, err := exec.Command("go", "build", "-o", bin, "./testdata/faultworker").CombinedOutput(); err != nil {
			faultErr = fmt.Errorf("building testdata/faultworker: %v\n%s", err, out)
			return
		}
		faultBin = bin
	})
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	return faultBin
}

// workerProc is one faultworker process, restartable under the same log.
type workerProc struct {
	t   *testing.T
	bin string
	env []string
	log string
	cmd *exec.Cmd
	err strings.Builder
}

func (p *workerProc) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin)
	p.cmd.Env = append(os.Environ(), append(p.env, "FAULT_LOG="+p.log)...)
	p.cmd.Stderr = &p.err
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("starting the worker: %v", err)
	}
}

func (p *workerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// records counts the start (S) and end (E) lines of every job in logs.
func records(t *testing.T, logs ...string) (starts, ends map[string]int) {
	t.Helper()
	starts, ends = map[string]int{}, map[string]int{}
	for _, path := range logs {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			kind, id, ok := strings.Cut(sc.Text(), " ")
			switch {
			case !ok:
			case kind == "S":
				starts[id]++
			case kind == "E":
				ends[id]++
			}
		}
		f.Close()
	}
	return starts, ends
}

// TestDurabilityUnderKills runs two worker processes on a Redis of its own
// with the append-only file on, while jobs are pushed one by one: it
// SIGKILLs a worker (restarting it), then the server (restarting it on its
// files), then counts, among the pushes Redis acknowledged, the jobs lost
// (never run, and gone from the store) and the jobs run twice. What it
// holds them to is docs/drivers.md's statement: with appendfsync always no
// acknowledged job is lost; with everysec only pushes acknowledged in the
// last second or two before the crash may be; either way a job may run
// twice (at least once), and none stays stuck past its lease.
func TestDurabilityUnderKills(t *testing.T) {
	t.Parallel()
	testutil.NeedPrograms(t, "the Redis durability test", "redis-server")
	bin := buildFaultWorker(t)
	const lease = 2 * time.Second
	for _, fsync := range []string{"always", "everysec"} {
		t.Run(fsync, func(t *testing.T) {
			t.Parallel()
			addr, restart := privateRedis(t, "--save", "", "--appendonly", "yes", "--appendfsync", fsync)
			rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			q, err := redisqueue.New(rdb, redisqueue.WithPrefix("dur"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			dir := t.TempDir()
			env := []string{"FAULT_ADDR=" + addr, "FAULT_PREFIX=dur", "FAULT_LEASE=" + lease.String()}
			a := &workerProc{t: t, bin: bin, env: env, log: filepath.Join(dir, "a.log")}
			b := &workerProc{t: t, bin: bin, env: env, log: filepath.Join(dir, "b.log")}
			a.start()
			b.start()
			defer func() {
				a.kill()
				b.kill()
				if t.Failed() {
					t.Logf("worker A's stderr:\n%s\nworker B's stderr:\n%s", a.err.String(), b.err.String())
				}
			}()

			// The producer pushes a job every 5 ms and notes when Redis
			// acknowledged each; a push that failed may still have been
			// stored, and is left out of the count.
			type ack struct {
				id string
				at time.Time
			}
			var mu sync.Mutex
			var acked []ack
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
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					err = q.Push(ctx, j)
					cancel()
					if err == nil {
						mu.Lock()
						acked = append(acked, ack{j.ID, time.Now()})
						mu.Unlock()
					}
				}
			}()
			ended := func(n int) func() bool {
				return func() bool {
					_, ends := records(t, a.log, b.log)
					return len(ends) >= n
				}
			}
			if !testutil.WaitFor(30*time.Second, ended(100)) {
				t.Fatal("the workers did not finish 100 jobs")
			}
			a.kill()
			a.start()
			if !testutil.WaitFor(30*time.Second, ended(300)) {
				t.Fatal("the workers did not finish 300 jobs after worker A's kill")
			}
			crash := time.Now()
			restart()
			if !testutil.WaitFor(30*time.Second, ended(600)) {
				t.Fatal("the workers did not go on after the server's restart")
			}
			close(stop)
			<-produced

			mu.Lock()
			defer mu.Unlock()
			want := map[string]time.Time{}
			for _, a := range acked {
				want[a.id] = a.at
			}
			// Every acknowledged job ends or is found gone; a job still in
			// the store after its lease and a retry's worth is stuck.
			lost := settleAcked(t, q, 3*lease+20*time.Second, func() []string {
				_, ends := records(t, a.log, b.log)
				var ids []string
				for id := range want {
					if ends[id] == 0 {
						ids = append(ids, id)
					}
				}
				return ids
			})
			starts, _ := records(t, a.log, b.log)
			twice := 0
			for id := range want {
				if starts[id] > 1 {
					twice++
				}
			}
			t.Logf("appendfsync %s: %d pushes acknowledged, %d lost, %d run more than once (a worker and the server SIGKILLed)", fsync, len(want), len(lost), twice)
			for _, id := range lost {
				switch at := want[id]; {
				case fsync == "always":
					t.Errorf("job %s, acknowledged %s before the crash, was lost under appendfsync always", id, crash.Sub(at).Round(time.Millisecond))
				case crash.Sub(at) > 2*time.Second:
					t.Errorf("job %s, acknowledged %s before the crash, was lost: everysec loses at most the last second or two", id, crash.Sub(at).Round(time.Millisecond))
				}
			}
		})
	}
}
