package redisqueue_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// chainMember dispatches, through q, a batch (protoBatch's callbacks) of
// one member on "bm", the first step of a chain, reserves it and acks it
// with its next step, on "bc", as a Worker finishing a chain step in a
// batch does (the Completion's Push carrying the batch). It returns the
// batch's ID and the next step's job.
func chainMember(t *testing.T, q *redisqueue.Queue, nextID string) (string, queue.Job) {
	t.Helper()
	id, err := queue.DispatchBatch(t.Context(), q, protoBatch(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	step := reserveAll(t, q, "bm", 1)[0]
	next := queue.Job{ID: nextID, Queue: "bc", Name: "step",
		Meta: map[string]string{queue.MetaBatch: id, queue.MetaChainAfter: step.ID}}
	c := driver.Completion{Lease: step.Lease(), Outcome: driver.OutcomeDone, Batch: id, Push: []queue.Job{next}}
	if err := testutil.Complete(t.Context(), q, c); err != nil {
		t.Fatalf("Complete of the step: %v (the outcome is recorded: its batch's steps are left to others)", err)
	}
	return id, next
}

// ackStep reserves the chain's next step on "bc", checks it is next, and
// acks it as its batch's member.
func ackStep(t *testing.T, q *redisqueue.Queue, id string, next queue.Job) {
	t.Helper()
	j := reserveAll(t, q, "bc", 1)[0]
	if j.ID != next.ID || queue.BatchOf(&j) != id {
		t.Fatalf("reserved %s of batch %q, want the next step %s of batch %s", j.ID, queue.BatchOf(&j), next.ID, id)
	}
	if err := testutil.Complete(t.Context(), q, driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Batch: id}); err != nil {
		t.Fatal(err)
	}
}

// wantQuiet checks that a sweep of every queue involved pushes nothing
// more and leaves no event in an outbox.
func wantQuiet(t *testing.T, q *redisqueue.Queue) {
	t.Helper()
	reserveAll(t, q, "bm", 0)
	reserveAll(t, q, "bc", 0)
	if got := callbacksRun(t, q); len(got) != 0 {
		t.Errorf("a second sweep pushed callbacks %v, want nothing", got)
	}
	for _, name := range []string{"bm", "bc"} {
		if n := outbox(t, q, name); n != 0 {
			t.Errorf("the outbox of %s holds %d events at the end, want 0", name, n)
		}
	}
}

// TestChainMemberStepsResume stops the advance of a chain that is a
// batch's member (scripts_batch.go: the step's outcome with its next step
// in the outbox; the event applied, the next step added to the batch
// with its push; the push stored; the push taken off the batch) after
// each of its steps, checks what a reader sees in between, and that
// another process finishes it: the next step pushed once, the batch
// counting both steps and finishing once, each callback pushed once.
func TestChainMemberStepsResume(t *testing.T) {
	t.Parallel()
	// finish runs the next step on peer and checks the batch finishes
	// once with both steps done.
	finish := func(t *testing.T, peer *redisqueue.Queue, id string, next queue.Job) {
		t.Helper()
		ackStep(t, peer, id, next)
		in := getInfo(t, peer, id)
		if in.Total != 2 || !in.Finished() || in.ThenAt.IsZero() {
			t.Errorf("after the chain's last step the batch is %+v, want 2 members, finished with then", in)
		}
		wantCounts(t, "at the end", in, 0, 2, 0, 0)
		if got := callbacksRun(t, peer); got[driver.BatchThen] != 1 || got[driver.BatchFinally] != 1 || len(got) != 2 {
			t.Errorf("callbacks %v, want then and finally once", got)
		}
		wantQuiet(t, peer)
	}
	t.Run("BetweenOutcomeAndBatch", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "member-noted")
		id, next := chainMember(t, killed, driver.NewID())
		// In between: the step is done and gone, its batch counts it
		// pending and knows no next step; the next step is nowhere.
		in := getInfo(t, peer, id)
		wantCounts(t, "in between", in, 1, 0, 0, 0)
		if in.Total != 1 {
			t.Errorf("in between the batch has %d members, want 1", in.Total)
		}
		if n, _ := peer.Len(t.Context(), "bc"); n != 0 {
			t.Errorf("Len(bc) = %d in between, want 0", n)
		}
		if n := outbox(t, peer, "bm"); n != 1 {
			t.Errorf("the outbox holds %d events in between, want 1", n)
		}
		reserveAll(t, peer, "bm", 0) // the sweep applies the event and pushes the step
		in = getInfo(t, peer, id)
		wantCounts(t, "after the sweep", in, 1, 1, 0, 0)
		if in.Finished() {
			t.Errorf("after the sweep the batch is %+v, want running: the chain's next step is pending", in)
		}
		reserveAll(t, peer, "bm", 0) // a second sweep pushes it no more
		finish(t, peer, id, next)
	})
	t.Run("BetweenBatchAndPush", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "events-applied")
		id, next := chainMember(t, killed, driver.NewID())
		// In between: the batch counts the step done and its next step
		// pending (never finished between the two), which is not pushed.
		in := getInfo(t, peer, id)
		wantCounts(t, "in between", in, 1, 1, 0, 0)
		if in.Total != 2 || in.Finished() {
			t.Errorf("in between the batch is %+v, want 2 members, running", in)
		}
		if n, _ := peer.Len(t.Context(), "bc"); n != 0 {
			t.Errorf("Len(bc) = %d in between, want 0", n)
		}
		reserveAll(t, peer, "bm", 0)
		reserveAll(t, peer, "bm", 0)
		if n, _ := peer.Len(t.Context(), "bc"); n != 1 {
			t.Errorf("Len(bc) = %d after two sweeps, want the next step once", n)
		}
		finish(t, peer, id, next)
	})
	t.Run("BetweenPushAndBatch", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "step-pushed")
		id, next := chainMember(t, killed, driver.NewID())
		// In between: the next step is stored, its push still on the
		// batch; the sweep finds its guard and stores it no more.
		if n, _ := peer.Len(t.Context(), "bc"); n != 1 {
			t.Errorf("Len(bc) = %d in between, want the next step", n)
		}
		wantCounts(t, "in between", getInfo(t, peer, id), 1, 1, 0, 0)
		reserveAll(t, peer, "bm", 0)
		if n, _ := peer.Len(t.Context(), "bc"); n != 1 {
			t.Errorf("Len(bc) = %d after the sweep, want the next step once", n)
		}
		finish(t, peer, id, next)
	})
	t.Run("StepRanBeforeTheSweep", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "step-pushed")
		id, next := chainMember(t, killed, driver.NewID())
		// The next step runs and is gone before the sweep: the batch
		// finishes on its event, and the sweep pushes it no more.
		finish(t, peer, id, next)
	})
	t.Run("StepIDTaken", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "step-pushed")
		taken := driver.NewID()
		if err := peer.Push(t.Context(), queue.Job{ID: taken, Queue: "bc", Name: "other"}); err != nil {
			t.Fatal(err)
		}
		id, _ := chainMember(t, killed, taken)
		// In between: the push stored nothing (an active job holds the
		// ID), the batch still counts the step pending.
		wantCounts(t, "in between", getInfo(t, peer, id), 1, 1, 0, 0)
		// The sweep finds the guard noting that, and drops the step from
		// the batch, which finishes.
		reserveAll(t, peer, "bm", 0)
		in := getInfo(t, peer, id)
		wantCounts(t, "after the sweep", in, 0, 1, 0, 0)
		if in.Total != 1 || !in.Finished() || in.ThenAt.IsZero() {
			t.Errorf("after the sweep the batch is %+v, want 1 member, finished with then", in)
		}
		if got := callbacksRun(t, peer); got[driver.BatchThen] != 1 || got[driver.BatchFinally] != 1 || len(got) != 2 {
			t.Errorf("callbacks %v, want then and finally once", got)
		}
		other := reserveAll(t, peer, "bc", 1)[0]
		if other.Name != "other" || queue.BatchOf(&other) != "" {
			t.Errorf("bc holds %s (batch %q), want the job that held the ID", other.Name, queue.BatchOf(&other))
		}
		if err := testutil.Ack(t.Context(), peer, other.Lease()); err != nil {
			t.Fatal(err)
		}
		wantQuiet(t, peer)
	})
	t.Run("CancelledBeforePush", func(t *testing.T) {
		t.Parallel()
		killed, peer := protoSetup(t, "events-applied")
		id, _ := chainMember(t, killed, driver.NewID())
		// The batch is cancelled between the step's addition and its
		// push: the step counts cancelled and is never pushed, as a
		// cancelled batch's ack pushes no next step.
		in, err := peer.CancelBatch(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		wantCounts(t, "after CancelBatch", in, 0, 1, 0, 1)
		if !in.Finished() {
			t.Errorf("after CancelBatch the batch is %+v, want finished", in)
		}
		reserveAll(t, peer, "bm", 0)
		if n, _ := peer.Len(t.Context(), "bc"); n != 0 {
			t.Errorf("Len(bc) = %d after the sweep, want 0: the cancelled batch's step was pushed", n)
		}
		if got := callbacksRun(t, peer); got[driver.BatchFinally] != 1 || len(got) != 1 {
			t.Errorf("callbacks %v, want finally alone", got)
		}
		wantQuiet(t, peer)
	})
}

// The jobs of TestChainMembersSIGKILL, handled by testdata/batchworker
// (same type names, so the same job names): step S of the chain that is
// member M of batch B, and the batches' callbacks.
type (
	chainStep struct{ B, M, S int }
	chainCB   struct{}
)

// TestChainMembersSIGKILL runs 12 batches of 10 members each, every
// member a chain of 2 or 3 steps whose steps go to queues "ch" and "ch2"
// in turn, on rounds of three worker processes that each SIGKILL
// themselves up to 5 ms after one of their first 60 steps started,
// wherever their work then is (a handler, an ack, a step of the batch
// protocol), until every batch has finished and nothing is left in the
// queues or their outboxes.
// Every step must have run, each pushed once (one CreatedAt, however
// often it ran again after a kill), every batch count each of its chains'
// steps as a member done, and each batch's then and finally be pushed
// once.
func TestChainMembersSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	t.Parallel()
	bin := buildBatchWorker(t)
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	const batches, members = 12, 10
	job := func(v any, name string) queue.Job {
		t.Helper()
		j, err := queue.NewJob(v, queue.OnQueue(name))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	steps := map[string]bool{} // "B:M:S" of every step
	ids := make([]string, batches)
	totals := make([]int, batches)
	for b := range batches {
		var bt queue.Batch
		for m := range members {
			var c queue.Chain
			for s := range 2 + (b+m)%2 {
				c.Steps = append(c.Steps, job(chainStep{b, m, s}, []string{"ch", "ch2"}[s%2]))
				steps[fmt.Sprintf("%d:%d:%d", b, m, s)] = true
			}
			first, err := c.First()
			if err != nil {
				t.Fatal(err)
			}
			bt.Jobs = append(bt.Jobs, first)
			totals[b] += len(c.Steps)
		}
		then, finally := job(chainCB{}, "ch"), job(chainCB{}, "ch")
		bt.Then, bt.Finally = &then, &finally
		id, err := queue.DispatchBatch(t.Context(), q, bt)
		if err != nil {
			t.Fatal(err)
		}
		ids[b] = id
	}
	finished := func() bool {
		for _, id := range ids {
			if !getInfo(t, q, id).Finished() {
				return false
			}
		}
		l, err := q.Len(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		return l == 0 && outbox(t, q, "ch") == 0 && outbox(t, q, "ch2") == 0
	}
	env := append(os.Environ(), "BATCHWORKER_ADDR="+testutil.DSN(t, testutil.RedisEnv), "BATCHWORKER_PREFIX="+p,
		"BATCHWORKER_KILL_AFTER_STEPS=60")
	kills := testutil.KillRounds(t, 3*time.Minute, finished, func() []*exec.Cmd {
		return startWorkers(t, bin, env, nil, nil, nil)
	})
	if kills == 0 {
		t.Errorf("no process was killed: the test proved nothing")
	}
	lines, err := rdb.LRange(t.Context(), "{"+p+"}:test:chain", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	pushes := map[string]map[string]bool{} // step or "batch:event" -> CreatedAt of each run
	runs := 0
	for _, l := range lines {
		kind, rest, _ := strings.Cut(l, ":")
		i := strings.LastIndexByte(rest, ':')
		if i < 0 || (kind != "s" && kind != "c") {
			t.Fatalf("unreadable log entry %q", l)
		}
		what, created := rest[:i], rest[i+1:]
		if kind == "s" {
			runs++
			if !steps[what] {
				t.Errorf("a step %s ran that no chain has", what)
			}
		}
		if pushes[what] == nil {
			pushes[what] = map[string]bool{}
		}
		pushes[what][created] = true
	}
	for s := range steps {
		if n := len(pushes[s]); n != 1 {
			t.Errorf("step %s ran from %d pushes (by CreatedAt), want 1", s, n)
		}
	}
	for b, id := range ids {
		in := getInfo(t, q, id)
		if in.Total != totals[b] {
			t.Errorf("batch %d has %d members, want its chains' %d steps", b, in.Total, totals[b])
		}
		wantCounts(t, fmt.Sprintf("batch %d at the end", b), in, 0, totals[b], 0, 0)
		for _, ev := range []driver.BatchEvent{driver.BatchThen, driver.BatchFinally, driver.BatchCatch} {
			want := 1
			if ev == driver.BatchCatch {
				want = 0
			}
			if n := len(pushes[id+":"+string(ev)]); n != want {
				t.Errorf("batch %d's %s pushed %d times (by CreatedAt), want %d", b, ev, n, want)
			}
		}
	}
	t.Logf("%d steps of %d chains in %d batches over %d SIGKILLs; %d step runs again after a kill",
		len(steps), batches*members, batches, kills, runs-len(steps))
}

// TestChainMemberCancelRace cancels a batch while another process pushes
// its chain member's next step (between reading the push off the batch
// and storing it): the step is counted cancelled and never stored, as a
// cancelled batch pushes no step.
func TestChainMemberCancelRace(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	racing := newQueue(t, rdb, p)
	peer := newQueue(t, client(t), p)
	redisqueue.SetSweepEvery(peer, 0)
	var id string
	cancelled := false
	redisqueue.SetBatchHook(racing, func(step string) error {
		if step == "steps-read" && !cancelled {
			cancelled = true
			in, err := peer.CancelBatch(t.Context(), id)
			if err != nil {
				t.Errorf("CancelBatch: %v", err)
			}
			wantCounts(t, "after CancelBatch", in, 0, 1, 0, 1)
		}
		return nil
	})
	b, err := queue.DispatchBatch(t.Context(), racing, protoBatch(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	id = b
	step := reserveAll(t, racing, "bm", 1)[0]
	next := queue.Job{ID: driver.NewID(), Queue: "bc", Name: "step", Meta: map[string]string{queue.MetaBatch: id}}
	c := driver.Completion{Lease: step.Lease(), Outcome: driver.OutcomeDone, Batch: id, Push: []queue.Job{next}}
	if err := testutil.Complete(t.Context(), racing, c); err != nil {
		t.Fatal(err)
	}
	if !cancelled {
		t.Fatal("the step's push was never read: the race was not run")
	}
	if n, _ := peer.Len(t.Context(), "bc"); n != 0 {
		t.Errorf("Len(bc) = %d, want 0: the cancelled batch's step was stored", n)
	}
	in := getInfo(t, peer, id)
	wantCounts(t, "at the end", in, 0, 1, 0, 1)
	if !in.Finished() {
		t.Errorf("the batch is %+v, want finished", in)
	}
	if got := callbacksRun(t, peer); got[driver.BatchFinally] != 1 || len(got) != 1 {
		t.Errorf("callbacks %v, want finally alone", got)
	}
	wantQuiet(t, peer)
}
