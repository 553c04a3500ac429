package redisqueue_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// The jobs of TestSequencesSIGKILL, handled by testdata/batchworker
// (same type names).
type (
	seqNote struct {
		Key string
		N   int
	}
	seqPlain struct{ N int }
)

// TestSequencesSIGKILL dispatches 400 jobs on queue "sq", 300 of them
// members of 10 sequences and 100 plain jobs between them, while rounds
// of three worker processes (4 handlers each, leases of 1 s) handle them,
// each process killing itself with SIGKILL at its 10th run of a member:
// one inside the handler after the run's start mark (the run never ends),
// one after its end mark, both before the ack, and one right after its
// 10th member's ack. Every handler run logs its start and end to one
// Redis list in write order (testutil.CheckSequences): every member ran
// to its end; no member started before the last run of the member
// dispatched before it had ended; no two members of a key ran at once,
// runs again of a killed member's lease apart (counted and logged);
// nothing is left in the queue.
func TestSequencesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel()
	bin := buildBatchWorker(t)
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
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
			return queue.Dispatch(ctx, q, seqPlain{i}, queue.OnQueue("sq"), killProof)
		}
		return queue.Dispatch(ctx, q, m, queue.OnQueue("sq"), queue.Sequence(m.Key), killProof)
	})
	env := append(os.Environ(), "BATCHWORKER_ADDR="+testutil.DSN(t, testutil.RedisEnv), "BATCHWORKER_PREFIX="+p,
		"BATCHWORKER_KILL_AFTER_SEQ=10")
	rounds := 0
	kills := testutil.KillRounds(t, 10*time.Minute, emptied(t, q, "sq", fed), func() []*exec.Cmd {
		rounds++
		return startWorkers(t, bin, env, nil, []string{"BATCHWORKER_KILL_AT=end"}, []string{"BATCHWORKER_KILL_AT=ack"})
	})
	lines, err := rdb.LRange(t.Context(), "{"+p+"}:test:seq", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var marks []testutil.SeqMark
	for _, l := range lines {
		if m, ok := testutil.ParseSeqMark(l); ok {
			marks = append(marks, m)
		}
	}
	st := testutil.CheckSequences(t, marks, want)
	if kills == 0 {
		t.Errorf("no process was killed: the test proved nothing")
	}
	t.Logf("%d members of %d sequences and %d plain jobs in %d rounds over %d SIGKILLs; %d member runs, %d run again after a kill (%d of them after a run killed before its end)",
		len(want), keys, n-len(want), rounds, kills, st.Runs, st.Extra, st.Overlapped)
}
