package sqlqueue_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// seqNote is a sequence member of testdata/worker (same type name).
type seqNote struct {
	Key string
	N   int
}

// seqMarks reads the marks the worker processes logged to path.
func seqMarks(t *testing.T, path string) []testutil.SeqMark {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []testutil.SeqMark
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := testutil.ParseSeqMark(sc.Text()); ok {
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSequencesSurviveSIGKILL dispatches 400 jobs, 300 of them members of
// 10 sequences and 100 plain jobs between them, while rounds of three
// worker processes (8 handlers each, leases of 1 s) handle them, each
// process killing itself with SIGKILL at its 10th run of a member: one
// inside the handler after the run's start mark (the run never ends),
// one after its end mark, both before the ack, and one right after its
// 10th member's ack. Every handler run logs its start and end to one
// file in write order (testutil.CheckSequences): every member ran to its
// end; no member started before the last run of the member dispatched
// before it had ended; no two members of a key ran at once, runs again
// of a killed member's lease apart (counted and logged); nothing is left
// in the store.
func TestSequencesSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel() // overlaps the package's other process tests' waits
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q := s.queue(t)
		const n, keys = 400, 10
		var want []string
		member := make(map[int]seqNote) // job i -> its member, the others plain
		for i := range n {
			if i%4 == 3 {
				continue
			}
			m := seqNote{fmt.Sprintf("s%d", len(want)%keys), i}
			member[i] = m
			want = append(want, fmt.Sprintf("%s:%d", m.Key, m.N))
		}
		fed := testutil.Feed(t, n, func(ctx context.Context, i int) error {
			m, ok := member[i]
			if !ok {
				return queue.Dispatch(ctx, q, procJob{i}, killProof)
			}
			return queue.Dispatch(ctx, q, m, queue.Sequence(m.Key), killProof)
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
		log := filepath.Join(t.TempDir(), "seq.log")
		env := []string{"WORKER_SEQ_LOG=" + log, "WORKER_KILL_AFTER_SEQ=10"}
		fleets, kills := killRounds(t, 10*time.Minute, finished, func() *fleet {
			return startFleetEach(t, b, s, time.Second, 0, env,
				nil, []string{"WORKER_KILL_AT=end"}, []string{"WORKER_KILL_AT=ack"})
		})
		st := testutil.CheckSequences(t, seqMarks(t, log), want)
		if kills == 0 {
			t.Errorf("no process was killed: the test proved nothing")
		}
		t.Logf("%s: %d members of %d sequences and %d plain jobs in %d rounds over %d SIGKILLs; %d member runs, %d run again after a kill (%d of them after a run killed before its end)",
			b.dialect, len(want), keys, n-len(want), len(fleets), kills, st.Runs, st.Extra, st.Overlapped)
	})
}
