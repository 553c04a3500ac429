package sqlqueue_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// killProof gives a job of a SIGKILL test more attempts than the test
// kills processes: a job whose attempt had started in a killed process is
// charged that attempt, and an unlucky one in flight at five kills would
// use up the default five and be dead-lettered, failing a check that is
// about the kills' other effects.
var killProof = queue.MaxAttempts(1000)

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
		for i := range n {
			want[i] = fmt.Sprintf("u%d:%d", i%keys, i)
		}
		fed := testutil.Feed(t, n, func(ctx context.Context, i int) error {
			key := fmt.Sprintf("u%d", i%keys)
			return queue.Dispatch(ctx, q, grpNote{key, i}, queue.Group(key), killProof)
		})
		finished := func() bool {
			if !fed() {
				return false
			}
			l, err := q.Len(t.Context(), "")
			if err != nil {
				t.Fatal(err)
			}
			return l == 0
		}
		// Rounds are bounded by the members left (each ends when its
		// processes have killed themselves); the deadline only stops
		// sets that no longer move (see TestGraphSurvivesSIGKILL).
		fleets, kills := killRounds(t, 10*time.Minute, finished, func() *fleet {
			return startFleetEnv(t, b, s, 3, time.Second, 0, []string{"WORKER_KILL_AFTER_SETS=4"}, "WORKER_KILL_AT=ack")
		})
		runs := groupRuns(t, fleets...)
		extra := testutil.CheckGroupSets(t, runs, want, 5)
		if kills == 0 {
			t.Errorf("no process was killed: the test proved nothing")
		}
		t.Logf("%s: %d members in %d sets over %d SIGKILLs; %d duplicate handler runs (a set run again after a kill before its ack)",
			b.dialect, n, len(runs)-extra, kills, extra)
	})
}
