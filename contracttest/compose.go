package contracttest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// composeStep is the job of the composition checks, on queue "cs": it
// records its name, and fails for good when Fail is set.
type composeStep struct {
	Name string
	Fail bool
}

// composeLog records the steps run, in order.
type composeLog struct {
	mu  sync.Mutex
	ran []string
	job map[string]queue.Job
}

func (l *composeLog) has(names ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(l.ran, n) {
			return false
		}
	}
	return true
}

func (l *composeLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ran)
}

func (l *composeLog) jobOf(n string) queue.Job {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.job[n]
}

func (l *composeLog) index(n string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Index(l.ran, n)
}

// composeWorker runs the composition checks' jobs on q.
func composeWorker(t *testing.T, q queue.Queue) *composeLog {
	l := &composeLog{job: map[string]queue.Job{}}
	w := queue.NewWorker(q).Slog(quiet).Queues("cs").Poll(pollEvery).Concurrency(4)
	queue.Handle(w, func(ctx context.Context, s composeStep) error {
		j, _ := queue.JobFromContext(ctx)
		l.mu.Lock()
		l.ran = append(l.ran, s.Name)
		l.job[s.Name] = j
		l.mu.Unlock()
		if s.Fail {
			return queue.Permanent(errors.New("step " + s.Name + " fails"))
		}
		return nil
	})
	runWorker(t, w)
	return l
}

// cstep returns a composition step job.
func cstep(t *testing.T, name string, fail bool) queue.Job {
	t.Helper()
	j, err := queue.NewJob(composeStep{name, fail}, queue.OnQueue("cs"))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// cchain returns the first job of a chain of the steps named, with catch
// (if not "") as its Catch.
func cchain(t *testing.T, catch string, steps ...queue.Job) queue.Job {
	t.Helper()
	c := queue.Chain{Steps: steps}
	if catch != "" {
		j := cstep(t, catch, false)
		c.Catch = &j
	}
	first, err := c.First()
	if err != nil {
		t.Fatalf("Chain.First: %v", err)
	}
	return first
}

// testCompose checks chains and batches inside each other (Laravel's
// chains in batches and batches in chains): a chain as a batch's member
// counts each step as a member as it comes, so the batch's Then comes
// after the chain's last step; a failed step is a failed member and ends
// its chain; a batch as a chain's step (Batch.Step) holds the chain until
// its Then, and a failed member sends the chain to its Catch.
func (s *suite) testCompose(t *testing.T) {
	dispatch := func(t *testing.T, q queue.Queue, b queue.Batch) string {
		t.Helper()
		id, err := queue.DispatchBatch(t.Context(), q, b)
		if errors.Is(err, queue.ErrUnsupported) {
			t.Skipf("the store keeps no chain in a batch: %v", err)
		}
		if err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		return id
	}
	checkAs(s, t, "ChainAsMember", func(t *testing.T, q queue.Queue, wf driver.Workflows) {
		then := cstep(t, "then", false)
		b := queue.Batch{Jobs: []queue.Job{
			cchain(t, "", cstep(t, "s1", false), cstep(t, "s2", false), cstep(t, "s3", false)),
			cstep(t, "m", false),
		}, Then: &then}
		id := dispatch(t, q, b)
		l := composeWorker(t, q)
		eventually(t, "the batch's Then", func() bool { return l.has("then") })
		if !l.has("s1", "s2", "s3", "m") || l.index("s1") > l.index("s2") || l.index("s2") > l.index("s3") || l.index("s3") > l.index("then") {
			t.Errorf("ran %v; want s1, s2, s3 in order, m, and then after s3", l.list())
		}
		info, err := wf.GetBatch(t.Context(), id)
		if err != nil || info.Total != 4 || info.Done != 4 || info.FinishedAt.IsZero() {
			t.Errorf("GetBatch = %+v, %v; want 4 members (3 steps and m), all done, finished", info, err)
		}
		if s3 := l.jobOf("s3"); queue.BatchOf(&s3) != id {
			t.Errorf("step s3 is a member of batch %q, want %q", queue.BatchOf(&s3), id)
		}
	})
	checkAs(s, t, "ChainMemberFails", func(t *testing.T, q queue.Queue, wf driver.Workflows) {
		catch, finally := cstep(t, "batch catch", false), cstep(t, "finally", false)
		b := queue.Batch{Jobs: []queue.Job{
			cchain(t, "chain catch", cstep(t, "s1", false), cstep(t, "s2", true), cstep(t, "s3", false)),
		}, Catch: &catch, Finally: &finally}
		id := dispatch(t, q, b)
		l := composeWorker(t, q)
		eventually(t, "the batch's Finally and the chain's Catch", func() bool { return l.has("finally", "chain catch", "batch catch") })
		if l.has("s3") {
			t.Errorf("ran %v; the step after the failed one ran", l.list())
		}
		info, err := wf.GetBatch(t.Context(), id)
		if err != nil || info.Total != 2 || info.Done != 1 || info.Failed != 1 {
			t.Errorf("GetBatch = %+v, %v; want 2 members (s1 done, s2 failed)", info, err)
		}
	})
	checkAs(s, t, "BatchAsStep", func(t *testing.T, q queue.Queue, wf driver.Workflows) {
		finally := cstep(t, "finally", false)
		step, err := queue.Batch{Jobs: []queue.Job{cstep(t, "m1", false), cstep(t, "m2", false)}, Finally: &finally}.Step(queue.OnQueue("cs"))
		if err != nil {
			t.Fatalf("Batch.Step: %v", err)
		}
		if _, err := queue.DispatchChain(t.Context(), q, queue.Chain{Steps: []queue.Job{cstep(t, "a", false), step, cstep(t, "c", false)}}); err != nil {
			t.Fatalf("DispatchChain: %v", err)
		}
		l := composeWorker(t, q)
		eventually(t, "the step after the batch", func() bool { return l.has("c", "finally") })
		if l.index("a") > l.index("m1") || l.index("m1") > l.index("c") || l.index("m2") > l.index("c") {
			t.Errorf("ran %v; want a, then m1 and m2, then c", l.list())
		}
		after := l.jobOf("c").Meta[queue.MetaChainAfter]
		if after != step.ID {
			t.Errorf("c follows %q, want the batch step's ID %q", after, step.ID)
		}
		info, err := wf.GetBatch(t.Context(), after)
		if err != nil || info.Total != 2 || info.Done != 2 {
			t.Errorf("GetBatch(the step's batch) = %+v, %v; want 2 members done", info, err)
		}
	})
	checkAs(s, t, "BatchStepFails", func(t *testing.T, q queue.Queue, wf driver.Workflows) {
		step, err := queue.Batch{Jobs: []queue.Job{cstep(t, "m1", true), cstep(t, "m2", false)}}.Step(queue.OnQueue("cs"))
		if err != nil {
			t.Fatalf("Batch.Step: %v", err)
		}
		catch := cstep(t, "chain catch", false)
		if _, err := queue.DispatchChain(t.Context(), q, queue.Chain{Steps: []queue.Job{step, cstep(t, "c", false)}, Catch: &catch}); err != nil {
			t.Fatalf("DispatchChain: %v", err)
		}
		l := composeWorker(t, q)
		eventually(t, "the chain's Catch", func() bool { return l.has("chain catch") })
		if got := l.jobOf("chain catch").Meta[queue.MetaBatchFailed]; got == "" {
			t.Errorf("the chain's Catch names no failed member (MetaBatchFailed)")
		}
		info, err := wf.GetBatch(t.Context(), step.ID)
		if err != nil || info.Failed != 1 {
			t.Errorf("GetBatch(the step's batch) = %+v, %v; want a failed member", info, err)
		}
		if l.has("c") {
			t.Errorf("ran %v; the step after a failed batch ran", l.list())
		}
	})
}
