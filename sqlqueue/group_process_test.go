package sqlqueue_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// grpNote is a group member of testdata/worker (same type name).
type grpNote struct {
	Key string
	N   int
}

// groupRuns reads the group sets every process of fleets logged.
func groupRuns(t *testing.T, fleets ...*fleet) []testutil.GroupSet {
	t.Helper()
	var out []testutil.GroupSet
	for _, fl := range fleets {
		for _, path := range fl.logs {
			f, err := os.Open(path)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if s, ok := testutil.ParseGroupSet(sc.Text()); ok {
					out = append(out, s)
				}
			}
			f.Close()
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// TestGroupsSurviveSIGKILL pushes 300 group members (12 groups) while
// rounds of three worker processes gather and handle them (grace 100 ms,
// sets of at most 5), each process killing itself with SIGKILL at its 4th
// set: two inside the handler before the ack (the set runs again, whole:
// a duplicate run, counted apart) and one right after an ack; gathers run
// in every process at once and die with them. No member is ever in two
// different sets, a set that runs again holds the same members, every
// member runs, and nothing is left in the store.
func TestGroupsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel() // overlaps the package's other process tests' waits
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q := s.queue(t)
		const n, keys = 300, 12
		want := make([]string, n)
		pushed := make(chan error, 1)
		go func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for i := range n {
				if i%3 == 0 {
					<-tick.C
				}
				key := fmt.Sprintf("u%d", i%keys)
				want[i] = fmt.Sprintf("%s:%d", key, i)
				if err := queue.Dispatch(t.Context(), q, grpNote{key, i}, queue.Group(key)); err != nil {
					pushed <- err
					return
				}
			}
			pushed <- nil
		}()
		all := false
		finished := func() bool {
			if !all {
				select {
				case err := <-pushed:
					if err != nil {
						t.Fatalf("dispatching a member: %v", err)
					}
					all = true
				default:
					return false
				}
			}
			l, err := q.Len(t.Context(), "")
			if err != nil {
				t.Fatal(err)
			}
			return l == 0
		}
		var fleets []*fleet
		kills := 0
		// Rounds are bounded by the members left (each ends when its
		// processes have killed themselves); the deadline only stops
		// sets that no longer move (see TestGraphSurvivesSIGKILL).
		const patience = 10 * time.Minute
		deadline := time.Now().Add(patience)
		for !finished() {
			if time.Now().After(deadline) {
				t.Fatalf("the members were not all handled within %s and %d kills", patience, kills)
			}
			fl := startFleetEnv(t, b, s, 3, time.Second, 0, []string{"WORKER_KILL_AFTER_SETS=4"}, "WORKER_KILL_AT=ack")
			fleets = append(fleets, fl)
			exited := make(chan *exec.Cmd, len(fl.procs))
			for _, p := range fl.procs {
				go func() { _ = p.Wait(); exited <- p }()
			}
			for left := len(fl.procs); left > 0; {
				select {
				case p := <-exited:
					left--
					if ws, ok := p.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
						kills++
					}
				case <-time.After(200 * time.Millisecond):
					if time.Now().After(deadline) {
						t.Fatalf("the members were not all handled within %s and %d kills", patience, kills)
					}
					if finished() {
						for _, p := range fl.procs {
							_ = p.Process.Signal(syscall.SIGTERM)
						}
					}
				}
			}
		}
		runs := groupRuns(t, fleets...)
		extra := testutil.CheckGroupSets(t, runs, want, 5)
		if kills == 0 {
			t.Errorf("no process was killed: the test proved nothing")
		}
		t.Logf("%s: %d members in %d sets over %d SIGKILLs; %d duplicate handler runs (a set run again after a kill before its ack)",
			b.dialect, n, len(runs)-extra, kills, extra)
	})
}
