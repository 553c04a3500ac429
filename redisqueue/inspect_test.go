package redisqueue_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// claimKey orders jobs as Reserve takes them: priority (higher first),
// then available-at; ties keep the order of the list.
func claimKey(a, b driver.JobInfo) int {
	return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.AvailableAt.Compare(b.AvailableAt))
}

// listAll pages through f with pages of limit and returns every job, failing
// on a job listed twice.
func listAll(t *testing.T, in driver.Inspector, f driver.JobFilter, limit int) []driver.JobInfo {
	t.Helper()
	f.Limit = limit
	var all []driver.JobInfo
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("ListJobs(%+v) did not end after 1000 pages", f)
		}
		page, err := in.ListJobs(t.Context(), f)
		if err != nil {
			t.Fatalf("ListJobs(%+v): %v", f, err)
		}
		for _, j := range page.Jobs {
			if seen[j.ID] {
				t.Fatalf("ListJobs(%s) listed job %s twice", f.State, j.ID)
			}
			seen[j.ID] = true
			if j.State != f.State {
				t.Fatalf("ListJobs(%s) listed job %s in state %s: %+v", f.State, j.ID, j.State, j)
			}
		}
		all = append(all, page.Jobs...)
		if page.Next == "" {
			return all
		}
		f.After = page.Next
	}
}

// TestInspectProductionShaped fills three queues as a busy deployment
// would (thousands of ready jobs over several priorities, thousands
// scheduled hours ahead, thousands of dead letters, a few running, some
// scheduled jobs come due and some leases expired that no reservation
// has moved back yet) and checks that the counts, the lists in every
// state and a bounded payload search agree with one another and with
// what was pushed.
func TestInspectProductionShaped(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q := newQueue(t, rdb, prefix(t, rdb))
	ctx := t.Context()
	names := []string{"mail", "bill", "sync"}
	const ready, ahead, dead = 3000, 3000, 2000
	now := time.Now()
	var jobs []queue.Job
	for i := range ready + ahead + dead {
		j := queue.Job{ID: driver.NewID(), Queue: names[i%3], Name: "shaped", Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
		j.Priority = []int{0, 0, 0, 5, -3}[i%5]
		if i%97 == 0 {
			j.Payload = fmt.Appendf(nil, `{"n":%d,"needle":true}`, i)
		}
		switch {
		case i < ready:
			j.AvailableAt = now.Add(-time.Duration(i%600) * time.Second)
		case i < ready+ahead:
			j.AvailableAt = now.Add(time.Hour + time.Duration(i)*time.Second)
			j.Queue = names[i%2] // "sync" has no scheduled job
		default:
			j.Queue = "dlq-" + names[i%3]
		}
		jobs = append(jobs, j)
	}
	for c := range slices.Chunk(jobs, 1000) {
		if _, err := q.PushMany(ctx, c); err != nil {
			t.Fatalf("PushMany: %v", err)
		}
	}
	// Dead letters: reserved and failed a batch at a time.
	for _, name := range names {
		for {
			got, err := q.Reserve(ctx, []string{"dlq-" + name}, 500, time.Minute)
			if err != nil {
				t.Fatalf("Reserve: %v", err)
			}
			if len(got) == 0 {
				break
			}
			outs := make([]driver.Completion, len(got))
			for i, j := range got {
				outs[i] = driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeFailed, Reason: "shaped"}
			}
			if _, _, err := q.Complete(ctx, nil, outs); err != nil {
				t.Fatalf("Complete: %v", err)
			}
		}
	}
	// Running: 7 under a long lease; 5 under a short one that expires;
	// 4 scheduled a moment ahead that come due.
	running, err := q.Reserve(ctx, []string{"mail"}, 7, time.Hour)
	if err != nil || len(running) != 7 {
		t.Fatalf("Reserve(7) = %d jobs, %v", len(running), err)
	}
	expiring, err := q.Reserve(ctx, []string{"bill"}, 5, 50*time.Millisecond)
	if err != nil || len(expiring) != 5 {
		t.Fatalf("Reserve(5) = %d jobs, %v", len(expiring), err)
	}
	soon := time.Now().Add(100 * time.Millisecond)
	for range 4 {
		j := queue.Job{Queue: "sync", Name: "shaped", Priority: 9, AvailableAt: soon}
		if err := q.Push(ctx, j); err != nil {
			t.Fatalf("Push: %v", err)
		}
	}
	passed := func() bool {
		return time.Now().After(soon.Add(50*time.Millisecond)) && time.Now().After(expiring[0].LeaseExpiresAt.Add(50*time.Millisecond))
	}
	if !testutil.WaitFor(5*time.Second, passed) {
		t.Fatal("the clock did not pass the short leases and the due times")
	}

	start := time.Now()
	counts, err := q.Counts(ctx)
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	t.Logf("Counts over %d queues: %v", len(counts), time.Since(start))
	byName := map[string]driver.QueueCounts{}
	var total driver.QueueCounts
	for _, c := range counts {
		byName[c.Queue] = c
		total.Ready.N += c.Ready.N
		total.Scheduled.N += c.Scheduled.N
		total.Running.N += c.Running.N
		total.Dead += c.Dead
		total.Pending += c.Pending
	}
	if total.Ready.N != ready+4-7 || total.Scheduled.N != ahead || total.Running.N != 7 || total.Dead != dead || total.Pending != ready+ahead+4 {
		t.Fatalf("Counts summed = %+v; want %d ready, %d scheduled, 7 running, %d dead", total, ready+4-7, ahead, dead)
	}
	if c := byName["sync"]; c.Scheduled.N != 0 || c.Ready.N != ready/3+4 {
		t.Errorf("Counts(sync) = %+v; want %d ready (4 of them due scheduled jobs), none scheduled", c, ready/3+4)
	}

	in := driver.Inspector(q)
	for _, st := range []driver.JobState{driver.StateReady, driver.StateScheduled, driver.StateRunning, driver.StateDead} {
		start := time.Now()
		all := listAll(t, in, driver.JobFilter{State: st}, 500)
		t.Logf("listing %d %s jobs by pages of 500: %v", len(all), st, time.Since(start))
		var want int64
		for _, c := range counts {
			switch st {
			case driver.StateReady:
				want += c.Ready.N
			case driver.StateScheduled:
				want += c.Scheduled.N
			case driver.StateRunning:
				want += c.Running.N
			case driver.StateDead:
				want += c.Dead
			}
		}
		if int64(len(all)) != want {
			t.Errorf("listed %d %s jobs; Counts says %d", len(all), st, want)
		}
		if st == driver.StateDead {
			if !slices.IsSortedFunc(all, func(a, b driver.JobInfo) int { return b.FinishedAt.Compare(a.FinishedAt) }) {
				t.Errorf("dead letters not listed newest first")
			}
			continue
		}
		if !slices.IsSortedFunc(all, claimKey) {
			t.Errorf("%s jobs not listed in claim order", st)
		}
		// One queue at a time, small pages: the same jobs.
		var perQueue int
		for _, name := range names {
			perQueue += len(listAll(t, in, driver.JobFilter{State: st, Queue: name}, 37))
		}
		if perQueue != len(all) {
			t.Errorf("%s: listed %d jobs queue by queue, %d over every queue", st, perQueue, len(all))
		}
	}
	// The running list holds the jobs under a live lease; the expired
	// ones are ready.
	runningIDs := listAll(t, in, driver.JobFilter{State: driver.StateRunning}, 50)
	if got, want := idsOf(runningIDs), sortedJobIDs(running); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("running jobs listed %v, want %v", got, want)
	}
	for _, j := range expiring {
		info, err := in.GetJob(ctx, j.ID)
		if err != nil || info.State != driver.StateReady || info.LeaseToken != "" {
			t.Errorf("GetJob(job %s, lease expired) = state %s, token %q, %v; want ready, no token", j.ID, info.State, info.LeaseToken, err)
		}
	}

	// A bounded search over every queue finds each needle once, the
	// same as a full listing filtered by hand.
	var want []string
	for _, j := range listAll(t, in, driver.JobFilter{State: driver.StateReady}, 500) {
		if strings.Contains(string(j.Payload), "needle") {
			want = append(want, j.ID)
		}
	}
	f := driver.JobFilter{State: driver.StateReady, Search: "needle", Scan: 1000, Limit: 10}
	var got []string
	bounded := 0
	start = time.Now()
	for calls := 0; ; calls++ {
		if calls > 100 {
			t.Fatal("the search did not end after 100 pages")
		}
		page, err := in.ListJobs(ctx, f)
		if err != nil {
			t.Fatalf("ListJobs(%+v): %v", f, err)
		}
		got = append(got, idsOf(page.Jobs)...)
		if page.Scanned > 0 {
			bounded++
			if page.Scanned > 1000 {
				t.Fatalf("a page examined %d jobs, over its Scan of 1000", page.Scanned)
			}
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	t.Logf("search of %d ready jobs: %d matches, %d pages stopped at their bound, %v", ready, len(got), bounded, time.Since(start))
	if !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("the search found %d needles, the listing %d; want the same, in list order", len(got), len(want))
	}
	if bounded == 0 {
		t.Errorf("no page stopped at its bound of 1000 jobs among %d", ready)
	}

	// Oldest ready: mail's oldest is at most ten minutes old.
	oldest, err := in.OldestReady(ctx)
	if err != nil {
		t.Fatalf("OldestReady: %v", err)
	}
	for _, name := range names {
		if age := time.Since(oldest[name]); age < 9*time.Minute || age > 11*time.Minute {
			t.Errorf("OldestReady(%s) is %v old, want about ten minutes", name, age)
		}
	}
	if n, err := in.DeadSince(ctx, now.Add(-time.Minute)); err != nil || n.N != dead {
		t.Errorf("DeadSince = %+v, %v; want %d", n, err, dead)
	}

	// A paused queue says so, with its counts; one paused with no job is
	// listed too.
	for _, name := range []string{"bill", "idle"} {
		if err := q.Pause(ctx, name); err != nil {
			t.Fatalf("Pause(%s): %v", name, err)
		}
	}
	stats, err := in.QueueStats(ctx)
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	paused := map[string]driver.QueueStats{}
	for _, st := range stats {
		if st.Paused {
			paused[st.Queue] = st
		}
	}
	if len(paused) != 2 || paused["bill"].Scheduled != byName["bill"].Scheduled || paused["idle"].Ready.N != 0 {
		t.Errorf("QueueStats paused = %+v; want bill (with its counts) and idle", paused)
	}
}

func idsOf(jobs []driver.JobInfo) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func sortedJobIDs(jobs []queue.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	slices.Sort(out)
	return out
}

// TestListCursorSurvivesChanges checks that a page's cursor is a place in
// the list order, not a position: jobs that leave the state after a page
// (reserved, retried) or join it before the cursor do not shift the next
// page, which starts at the first job after the last one listed.
func TestListCursorSurvivesChanges(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q := newQueue(t, rdb, prefix(t, rdb))
	ctx := t.Context()
	var ids []string
	for i := range 40 {
		j := queue.Job{ID: fmt.Sprintf("job-%02d", i), Queue: "cur", Name: "x"}
		if err := q.Push(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	first, err := q.ListJobs(ctx, driver.JobFilter{State: driver.StateReady, Queue: "cur", Limit: 10})
	if err != nil || !slices.Equal(idsOf(first.Jobs), ids[:10]) || first.Next == "" {
		t.Fatalf("first page = %v, next %q, %v; want %v and a cursor", idsOf(first.Jobs), first.Next, err, ids[:10])
	}
	// Jobs 0 to 14 are reserved (the last listed one among them), and a
	// job of a higher priority joins before the cursor.
	got, err := q.Reserve(ctx, []string{"cur"}, 15, time.Minute)
	if err != nil || len(got) != 15 {
		t.Fatalf("Reserve(15) = %d jobs, %v", len(got), err)
	}
	if err := q.Push(ctx, queue.Job{ID: "urgent", Queue: "cur", Name: "x", Priority: 9}); err != nil {
		t.Fatal(err)
	}
	second, err := q.ListJobs(ctx, driver.JobFilter{State: driver.StateReady, Queue: "cur", Limit: 10, After: first.Next})
	if err != nil || !slices.Equal(idsOf(second.Jobs), ids[15:25]) {
		t.Fatalf("second page after changes = %v, %v; want %v", idsOf(second.Jobs), err, ids[15:25])
	}

	// Dead letters, newest first: retrying the last one listed keeps the
	// place; the next page starts after it.
	for _, j := range got {
		if err := testutil.Fail(ctx, q, j.Lease(), "dead"); err != nil {
			t.Fatal(err)
		}
	}
	all := listAll(t, q, driver.JobFilter{State: driver.StateDead}, 100)
	page, err := q.ListJobs(ctx, driver.JobFilter{State: driver.StateDead, Limit: 5})
	if err != nil || len(page.Jobs) != 5 {
		t.Fatalf("dead page = %d jobs, %v", len(page.Jobs), err)
	}
	if err := q.RetryDead(ctx, page.Jobs[4].ID); err != nil {
		t.Fatal(err)
	}
	next, err := q.ListJobs(ctx, driver.JobFilter{State: driver.StateDead, Limit: 5, After: page.Next})
	if err != nil || !slices.Equal(idsOf(next.Jobs), idsOf(all[5:10])) {
		t.Fatalf("dead page after a retry = %v, %v; want %v", idsOf(next.Jobs), err, idsOf(all[5:10]))
	}
}
