package sqlqueue_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
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
		report(t, q, "w1", map[string]int{"a": 2}, nil)

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
// running jobs the workers report are still counted and listed exactly (on
// PostgreSQL no index holds the lease expiry, and they are read from the
// head of the claim order).
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
		report(t, q, "w1", map[string]int{"big": 5}, map[string]int{"big": 2})
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

// report heartbeats worker id of q holding running and reserved jobs by
// queue, as a Worker reports the jobs it holds.
func report(t *testing.T, q *sqlqueue.Queue, id string, running, reserved map[string]int) {
	t.Helper()
	w := queue.WorkerInfo{ID: id, Host: "test", PID: 1, Queues: []string{"any"}, Concurrency: 10, Running: running, Reserved: reserved}
	if err := q.Heartbeat(t.Context(), w); err != nil {
		t.Fatalf("Heartbeat(%s): %v", id, err)
	}
}

// TestRunningFromWorkerReports: a queue's running count is the sum of what
// the live workers report they hold, a dead worker's report stops counting
// once it is older than the worker TTL, jobs held by a bare Reserve are
// counted ready and not listed, and the running list reads only the
// queues workers hold jobs in, paging correctly across them.
func TestRunningFromWorkerReports(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		q, db := s.open(t)
		ctx := t.Context()
		for _, name := range []string{"served", "other", "bare"} {
			jobs := make([]queue.Job, 20)
			for i := range jobs {
				jobs[i] = queue.Job{ID: queue.NewID(), Queue: name, Name: "n", Priority: i % 3}
			}
			if stored, err := q.PushMany(ctx, jobs); err != nil || slices.Contains(stored, false) {
				t.Fatalf("PushMany: %v", err)
			}
		}
		reserve := func(name string, n int) []queue.Job {
			t.Helper()
			got, err := q.Reserve(ctx, []string{name}, n, time.Hour)
			if err != nil || len(got) != n {
				t.Fatalf("Reserve(%s) = %d jobs, %v; want %d", name, len(got), err, n)
			}
			return got
		}
		served, other := reserve("served", 7), reserve("other", 5)
		reserve("bare", 4) // held by nobody who reports
		report(t, q, "w1", map[string]int{"served": 4}, map[string]int{"other": 5})
		report(t, q, "w2", map[string]int{"served": 2}, map[string]int{"served": 1})

		counts := func() map[string][3]int64 {
			t.Helper()
			cs, err := q.Counts(ctx)
			if err != nil {
				t.Fatalf("Counts: %v", err)
			}
			out := map[string][3]int64{}
			for _, c := range cs {
				out[c.Queue] = [3]int64{c.Ready.N, c.Running.N, c.Pending}
			}
			return out
		}
		want := map[string][3]int64{"served": {13, 7, 20}, "other": {15, 5, 20}, "bare": {20, 0, 20}}
		if got := counts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Counts (ready, running, pending) = %v, want %v", got, want)
		}
		stats, err := q.QueueStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range stats {
			if w := want[st.Queue]; st.Ready.N != w[0] || st.Running.N != w[1] || st.Running.More || st.Ready.Estimate {
				t.Errorf("QueueStats(%s): ready %+v, running %+v; want %d, %d, exact", st.Queue, st.Ready, st.Running, w[0], w[1])
			}
		}

		// The list walks the served queues only, in claim order, page by page.
		var all []string
		for after := ""; ; {
			page, err := q.ListJobs(ctx, queue.JobFilter{State: queue.StateRunning, Limit: 3, After: after})
			if err != nil {
				t.Fatalf("ListJobs(running): %v", err)
			}
			for _, j := range page.Jobs {
				all = append(all, j.ID)
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		held := append(slices.Clone(served), other...)
		if w := jobIDs(held); !sameSet(all, w) || len(all) != len(w) {
			t.Errorf("running list = %v, want the served and other jobs %v, each once", all, w)
		}
		prio := map[string]int{}
		for _, j := range held {
			prio[j.ID] = j.Priority
		}
		if !slices.IsSortedFunc(all, func(a, b string) int { return prio[b] - prio[a] }) {
			t.Errorf("running list = %v, not in claim order (highest priority first)", all)
		}
		for _, name := range []string{"bare", "nobody"} {
			page, err := q.ListJobs(ctx, queue.JobFilter{State: queue.StateRunning, Queue: name})
			if err != nil || len(page.Jobs) != 0 {
				t.Errorf("ListJobs(running, %s) = %d jobs, %v; want none: no worker holds its jobs", name, len(page.Jobs), err)
			}
		}

		// w2 dies: once its last heartbeat is older than the worker TTL
		// its jobs count as ready.
		old := time.Now().Add(-time.Hour).UnixMicro()
		if _, err := db.ExecContext(ctx, fmt.Sprintf("UPDATE %s_workers SET last_seen = %d WHERE id = 'w2'", s.table, old)); err != nil {
			t.Fatal(err)
		}
		want["served"] = [3]int64{16, 4, 20}
		if got := counts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after w2's report aged out, Counts (ready, running, pending) = %v, want %v", got, want)
		}

		// Reports past what is pending (a report lagging the acks) count
		// no more than is pending.
		report(t, q, "w1", map[string]int{"served": 40}, nil)
		want["served"], want["other"] = [3]int64{0, 20, 20}, [3]int64{20, 0, 20}
		if got := counts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after an excessive report, Counts (ready, running, pending) = %v, want %v", got, want)
		}
	})
}

func jobIDs(jobs []queue.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
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
