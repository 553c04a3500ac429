package sqlqueue_test

import (
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// TestInspectAcrossQueuesAndPriorities checks the index-driven inspection
// paths: lists without a queue filter merge the queues in claim order
// (priority, then run time, then insertion) and page through them, and counts of scheduled and running jobs are
// exact over several priorities.
func TestInspectAcrossQueuesAndPriorities(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t)
		ctx := t.Context()
		later := time.Now().Add(time.Hour)
		var ready, scheduled []string
		var jobs []queue.Job
		for i := range 30 {
			j := queue.Job{ID: queue.NewID(), Queue: []string{"a", "b", "c"}[i%3], Name: "n", Priority: []int{5, 0, -3, 0}[i%4]}
			if i%5 == 0 {
				j.AvailableAt = later
				scheduled = append(scheduled, j.ID)
			} else {
				ready = append(ready, j.ID)
			}
			jobs = append(jobs, j)
		}
		if stored, err := q.PushMany(ctx, jobs); err != nil || slices.Contains(stored, false) {
			t.Fatalf("PushMany = %v, %v", stored, err)
		}
		// Two running jobs in "a": reserved, then moved out of order.
		got, err := q.Reserve(ctx, []string{"a"}, 2, time.Hour)
		if err != nil || len(got) != 2 {
			t.Fatalf("Reserve = %d, %v", len(got), err)
		}
		var running []string
		for _, j := range got {
			running = append(running, j.ID)
			ready = slices.DeleteFunc(ready, func(id string) bool { return id == j.ID })
		}

		list := func(state queue.JobState, queueName string) []string {
			var ids []string
			for after := ""; ; {
				page, err := q.ListJobs(ctx, queue.JobFilter{State: state, Queue: queueName, Limit: 4, After: after})
				if err != nil {
					t.Fatalf("ListJobs(%s): %v", state, err)
				}
				for _, j := range page.Jobs {
					ids = append(ids, j.ID)
				}
				if page.Next == "" {
					return ids
				}
				after = page.Next
			}
		}
		// Claim order: the ready jobs share one run time and the scheduled
		// ones another, so within a state it is priority, then push order.
		prio := map[string]int{}
		for _, j := range jobs {
			prio[j.ID] = j.Priority
		}
		claimOrder := func(ids []string) []string {
			ids = slices.Clone(ids)
			slices.SortStableFunc(ids, func(a, b string) int { return prio[b] - prio[a] })
			return ids
		}
		for _, c := range []struct {
			state queue.JobState
			want  []string
		}{{queue.StateReady, claimOrder(ready)}, {queue.StateScheduled, claimOrder(scheduled)}} {
			if got := list(c.state, ""); !slices.Equal(got, c.want) {
				t.Errorf("%s jobs listed as %v, want in claim order %v", c.state, got, c.want)
			}
		}
		if got := list(queue.StateRunning, ""); len(got) != 2 || !slices.Contains(got, running[0]) || !slices.Contains(got, running[1]) {
			t.Errorf("running jobs listed as %v, want %v", got, running)
		}
		var wantB []string
		for _, j := range jobs {
			if j.Queue == "b" && j.AvailableAt.IsZero() {
				wantB = append(wantB, j.ID)
			}
		}
		if got := list(queue.StateReady, "b"); !slices.Equal(got, claimOrder(wantB)) {
			t.Errorf("ready jobs of b listed as %v, want %v", got, wantB)
		}

		stats, err := q.QueueStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][3]int64{"a": {6, 2, 2}, "b": {8, 2, 0}, "c": {8, 2, 0}}
		for _, s := range stats {
			w := want[s.Queue]
			if got := [3]int64{s.Ready.N, s.Scheduled.N, s.Running.N}; got != w {
				t.Errorf("queue %s: ready, scheduled, running = %v, want %v", s.Queue, got, w)
			}
		}
		if len(stats) != 3 {
			t.Errorf("QueueStats has %d queues, want 3", len(stats))
		}
	})
}

// TestRunningBehindABacklog: with more due jobs than any count reads, the
// running jobs are still counted and listed exactly (on PostgreSQL no index
// holds the lease expiry, and they are read from the head of the claim
// order).
func TestRunningBehindABacklog(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t)
		ctx := t.Context()
		jobs := make([]queue.Job, 20500)
		for i := range jobs {
			jobs[i] = queue.Job{ID: queue.NewID(), Queue: "big", Name: "n", Payload: []byte("{}")}
		}
		if stored, err := q.PushMany(ctx, jobs); err != nil || slices.Contains(stored, false) {
			t.Fatalf("PushMany: %v", err)
		}
		got, err := q.Reserve(ctx, []string{"big"}, 7, time.Hour)
		if err != nil || len(got) != 7 {
			t.Fatalf("Reserve = %d jobs, %v; want 7", len(got), err)
		}
		var want []string
		for _, j := range got {
			want = append(want, j.ID)
		}
		slices.Sort(want)
		stats, err := q.QueueStats(ctx)
		if err != nil || len(stats) != 1 {
			t.Fatalf("QueueStats = %v, %v", stats, err)
		}
		if s := stats[0]; s.Running != (queue.Count{N: 7}) || s.Ready != (queue.Count{N: 20493}) {
			t.Fatalf("QueueStats: running %+v, ready %+v; want exactly 7 running and 20,493 ready (the store's counts)", s.Running, s.Ready)
		}
		for _, queueName := range []string{"big", ""} {
			page, err := q.ListJobs(ctx, queue.JobFilter{State: queue.StateRunning, Queue: queueName})
			if err != nil {
				t.Fatalf("ListJobs(running, %q): %v", queueName, err)
			}
			var ids []string
			for _, j := range page.Jobs {
				ids = append(ids, j.ID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, want) || page.Next != "" {
				t.Fatalf("ListJobs(running, %q) = %v (next %q), want %v", queueName, ids, page.Next, want)
			}
		}
	})
}
