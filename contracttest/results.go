package contracttest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// resultStep is the job of the result checks: it adds N to its chain
// predecessor's result (0 for the first step) and returns the sum.
type resultStep struct{ N int }

// testResults checks driver.Results: a done outcome's result is stored
// with its ack and outlives the job; nothing else stores one; a result
// past its time is not read; the Worker carries a handler's result
// (queue.SetResult) to the store, and a chain's next step and the
// dispatcher read it (queue.ResultOf).
func (s *suite) testResults(t *testing.T) {
	result := func(t *testing.T, r driver.Results, id string) ([]byte, error) {
		t.Helper()
		b, err := r.Result(t.Context(), id)
		if err != nil && !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Result(%s): %v", id, err)
		}
		return b, err
	}
	checkAs(s, t, "StoredWithAckAfterJobGone", func(t *testing.T, q queue.Queue, r driver.Results) {
		pushN(t, q, "res", 3)
		jobs := reserve(t, q, []string{"res"}, 3, longLease)
		if len(jobs) != 3 {
			t.Fatalf("reserved %d jobs, want 3", len(jobs))
		}
		until := time.Now().Add(time.Hour)
		big := make([]byte, driver.MaxResultBytes)
		big[0], big[len(big)-1] = '"', '"'
		for i := 1; i < len(big)-1; i++ {
			big[i] = 'a' + byte(i%26)
		}
		want := [][]byte{[]byte(`{"sum":42}`), nil, big}
		outs := make([]driver.Completion, len(jobs))
		for i, j := range jobs {
			outs[i] = driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Result: want[i], ResultUntil: until}
		}
		_, errs, err := q.Complete(t.Context(), nil, outs)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("Complete of job %d: %v", i, e)
			}
		}
		wantLen(t, q, "res", 0)
		for i, j := range jobs {
			b, err := result(t, r, j.ID)
			switch {
			case want[i] == nil && err == nil:
				t.Errorf("job %s acked without a result has result %q", j.ID, b)
			case want[i] != nil && string(b) != string(want[i]):
				t.Errorf("job %s's result is %d bytes (%v), want the %d stored", j.ID, len(b), err, len(want[i]))
			}
		}
	})
	checkAs(s, t, "OnlyDoneUnderCurrentLease", func(t *testing.T, q queue.Queue, r driver.Results) {
		pushN(t, q, "res", 4)
		jobs := reserve(t, q, []string{"res"}, 4, longLease)
		if len(jobs) != 4 {
			t.Fatalf("reserved %d jobs, want 4", len(jobs))
		}
		res, until := []byte(`"x"`), time.Now().Add(time.Hour)
		stale := jobs[0].Lease()
		stale.Token += "-stale"
		outs := []driver.Completion{
			{Lease: stale, Outcome: driver.OutcomeDone, Result: res, ResultUntil: until},
			{Lease: jobs[1].Lease(), Outcome: driver.OutcomeRetried, Reason: "again", Result: res, ResultUntil: until},
			{Lease: jobs[2].Lease(), Outcome: driver.OutcomeFailed, Reason: "dead", Result: res, ResultUntil: until},
			{Lease: jobs[3].Lease(), Outcome: driver.OutcomeDone, Result: res, ResultUntil: time.Now().Add(-time.Second)},
		}
		_, errs, err := q.Complete(t.Context(), nil, outs)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if !errors.Is(errs[0], queue.ErrLeaseLost) {
			t.Errorf("Complete under a stale lease: %v, want ErrLeaseLost", errs[0])
		}
		for i, j := range jobs {
			if b, err := result(t, r, j.ID); err == nil {
				t.Errorf("outcome %d (%s) stored result %q; want none (stale lease, not done, or past its time)", i, outs[i].Outcome, b)
			}
		}
	})
	checkAs(s, t, "BatchMember", func(t *testing.T, q queue.Queue, r driver.Results) {
		if workflows(q) == nil {
			t.Skip(lacks(q, "Workflows"))
		}
		if _, err := queue.DispatchBatch(t.Context(), q, newBatch(t, 2, false)); err != nil {
			t.Fatalf("DispatchBatch: %v", err)
		}
		for id, j := range reserveMembers(t, q, 2) {
			c := driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Batch: queue.BatchOf(&j),
				Result: []byte(strconv.Quote(id)), ResultUntil: time.Now().Add(time.Hour)}
			if err := completeOne(t.Context(), q, c); err != nil {
				t.Fatalf("Complete of member %s: %v", id, err)
			}
			if b, _ := result(t, r, id); string(b) != strconv.Quote(id) {
				t.Errorf("member %s's result is %q, want %q", id, b, strconv.Quote(id))
			}
		}
	})
	checkAs(s, t, "ChainAndDispatcher", func(t *testing.T, q queue.Queue, r driver.Results) {
		w := queue.NewWorker(q).Slog(quiet).Queues("res").Poll(20 * time.Millisecond)
		queue.Handle(w, func(ctx context.Context, s resultStep) error {
			j, _ := queue.JobFromContext(ctx)
			sum := s.N
			if prev := j.Meta[queue.MetaChainAfter]; prev != "" {
				p, err := queue.ResultOf[int](ctx, q, prev, 0)
				if err != nil {
					return queue.Permanent(err)
				}
				sum += p
			}
			return queue.SetResult(ctx, sum)
		})
		var ch queue.Chain
		for _, n := range []int{1, 2, 3} {
			j, err := queue.NewJob(resultStep{n}, queue.OnQueue("res"))
			if err != nil {
				t.Fatal(err)
			}
			ch.Steps = append(ch.Steps, j)
		}
		if _, err := queue.DispatchChain(t.Context(), q, ch); err != nil {
			t.Fatalf("DispatchChain: %v", err)
		}
		last := ch.Steps[2].ID
		if _, err := queue.ResultOf[int](t.Context(), q, last, 0); !errors.Is(err, queue.ErrNoResult) {
			t.Errorf("ResultOf a step not run, without waiting: %v, want ErrNoResult", err)
		}
		stop := runWorker(t, w)
		defer stop()
		got, err := queue.ResultOf[int](t.Context(), q, last, patience)
		if err != nil || got != 6 {
			t.Fatalf("ResultOf the last step = %d, %v; want 6 (1+2+3, each step reading the one before)", got, err)
		}
		if _, err := queue.ResultOf[string](t.Context(), q, last, 0); !errors.Is(err, queue.ErrDecode) {
			t.Errorf("ResultOf into the wrong type: %v, want ErrDecode", err)
		}
	})
}
