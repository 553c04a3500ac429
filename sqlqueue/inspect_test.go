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

// TestManyPriorities: a queue with more distinct priorities than the
// inspection reads enumerate (32) is read by filtering its pending jobs,
// beside a queue read per priority: its oldest ready job, its counts, its
// list in claim order and a search over it are the same as with few.
func TestManyPriorities(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t)
		ctx := t.Context()
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		var jobs []queue.Job
		var many []string // queue "m" in claim order: priority 39 down to 0
		for p := 39; p >= 0; p-- {
			j := queue.Job{ID: queue.NewID(), Queue: "m", Name: "n", Priority: p, AvailableAt: base.Add(time.Duration(p) * time.Second)}
			if p%10 == 3 {
				j.Payload = []byte(`{"needle":true}`)
			}
			jobs = append(jobs, j)
			many = append(many, j.ID)
		}
		jobs = append(jobs,
			queue.Job{ID: queue.NewID(), Queue: "f", Name: "n", Priority: 1, AvailableAt: base.Add(time.Minute)},
			queue.Job{ID: queue.NewID(), Queue: "f", Name: "n", AvailableAt: base.Add(2 * time.Minute)},
			queue.Job{ID: queue.NewID(), Queue: "m", Name: "n", Priority: 50, AvailableAt: time.Now().Add(time.Hour)})
		if stored, err := q.PushMany(ctx, jobs); err != nil || slices.Contains(stored, false) {
			t.Fatalf("PushMany = %v, %v", stored, err)
		}
		oldest, err := q.OldestReady(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !oldest["m"].Equal(base) || !oldest["f"].Equal(base.Add(time.Minute)) || len(oldest) != 2 {
			t.Errorf("OldestReady = %v, want m at %v and f at %v", oldest, base, base.Add(time.Minute))
		}
		stats, err := q.QueueStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stats {
			if s.Queue == "m" && (s.Ready.N != 40 || s.Scheduled.N != 1) {
				t.Errorf("queue m: ready %d, scheduled %d; want 40 and 1", s.Ready.N, s.Scheduled.N)
			}
		}
		var listed, found []string
		for _, search := range []string{"", "needle"} {
			for after := ""; ; {
				page, err := q.ListJobs(ctx, queue.JobFilter{State: queue.StateReady, Queue: "m", Search: search, Limit: 7, After: after})
				if err != nil {
					t.Fatalf("ListJobs(search %q): %v", search, err)
				}
				for _, j := range page.Jobs {
					if search == "" {
						listed = append(listed, j.ID)
					} else {
						found = append(found, j.ID)
					}
				}
				if after = page.Next; after == "" {
					break
				}
			}
		}
		if !slices.Equal(listed, many) {
			t.Errorf("ready jobs of m listed as %v, want by priority %v", listed, many)
		}
		if want := []string{many[6], many[16], many[26], many[36]}; !slices.Equal(found, want) {
			t.Errorf("search found %v, want %v", found, want)
		}
	})
}
