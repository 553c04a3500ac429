package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

func batch(n int, queueName string) []queue.Job {
	jobs := make([]queue.Job, n)
	for i := range jobs {
		jobs[i] = queue.Job{ID: queue.NewID(), Queue: queueName, Name: "Copy", Payload: fmt.Appendf(nil, "%d\x00raw", i)}
	}
	return jobs
}

// A large batch without unique keys is loaded by COPY with rows equal to
// Push's, wakes a waiter once, and falls back to the per-job INSERT when
// an ID is taken: by an active job (not stored) or a dead letter
// (revived).
func TestPushManyCopy(t *testing.T) {
	t.Parallel()
	q := newQueue(t, testDSN(t))
	ctx := t.Context()

	done := waitAsync(ctx, q, []string{"bulk"}, safetyPoll)
	staysWaiting(t, done, 100*time.Millisecond, "before the COPY")
	jobs := batch(300, "bulk")
	at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	jobs[0] = queue.Job{ID: jobs[0].ID, Queue: "bulk", Name: "Full", Payload: []byte("not json"), Priority: 3,
		MaxAttempts: 4, Timeout: 2 * time.Second, Tags: []string{"a", "b"}, Meta: map[string]string{"k": "v"}, AvailableAt: at, CreatedAt: at}
	jobs[1].Queue, jobs[1].Payload = "", nil
	stored, err := q.PushMany(ctx, jobs)
	if err != nil || len(stored) != len(jobs) || slices.Contains(stored, false) {
		t.Fatalf("PushMany of %d new jobs = %d stored flags (false among them: %v), %v", len(jobs), len(stored), slices.Contains(stored, false), err)
	}
	woken(t, done, "a COPY batch")
	info, err := q.GetJob(ctx, jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	got, want := info.Job, jobs[0]
	if got.Name != want.Name || string(got.Payload) != "not json" || got.Priority != 3 || got.MaxAttempts != 4 ||
		got.Timeout != 2*time.Second || !slices.Equal(got.Tags, want.Tags) || got.Meta["k"] != "v" ||
		!got.AvailableAt.Equal(at) || !got.CreatedAt.Equal(at) || got.Attempts != 0 || info.State != queue.StateReady {
		t.Fatalf("copied job = %+v (state %v), want the fields of %+v, ready", got, info.State, want)
	}
	if info, err := q.GetJob(ctx, jobs[1].ID); err != nil || info.Job.Queue != queue.DefaultQueue || info.Job.Payload == nil {
		t.Fatalf("copied job without queue and payload = %+v, %v; want the default queue and an empty payload", info.Job, err)
	}
	if n, _ := q.Len(ctx, ""); n != len(jobs) {
		t.Fatalf("Len = %d, want %d", n, len(jobs))
	}

	// Reserved in order: the priority 3 job first.
	first, err := q.Reserve(ctx, []string{"bulk"}, 1, time.Minute)
	if err != nil || len(first) != 1 || first[0].ID != jobs[0].ID {
		t.Fatalf("Reserve = %v, %v; want the priority job %s", first, err, jobs[0].ID)
	}
	if err := testutil.Fail(ctx, q, first[0].Lease(), "dead"); err != nil {
		t.Fatal(err)
	}

	// A batch that repeats an active ID and the dead letter's ID.
	again := batch(300, "bulk")
	again[10].ID = jobs[5].ID   // active: skipped
	again[20].ID = jobs[0].ID   // dead letter: revived
	again[30].ID = again[29].ID // repeated in the batch: the second skipped
	stored, err = q.PushMany(ctx, again)
	if err != nil {
		t.Fatalf("PushMany with taken IDs: %v", err)
	}
	for i, s := range stored {
		if want := i != 10 && i != 30; s != want {
			t.Fatalf("stored[%d] = %v, want %v", i, s, want)
		}
	}
	if info, err := q.GetJob(ctx, jobs[0].ID); err != nil || info.State != queue.StateReady || info.Job.Attempts != 0 {
		t.Fatalf("revived dead letter = %+v, %v; want ready with no attempts", info, err)
	}
	if n, _ := q.Len(ctx, ""); n != len(jobs)-1+298 {
		t.Fatalf("Len = %d, want %d (the dead letter is not counted)", n, len(jobs)-1+298)
	}

	// The COPY path itself: all or nothing, a taken ID is a conflict.
	fresh := batch(copyMinForTest, "bulk")
	if stored, err := postgres.PushCopy(q, ctx, fresh); err != nil || len(stored) != len(fresh) {
		t.Fatalf("COPY of new jobs = %d stored, %v", len(stored), err)
	}
	taken := batch(copyMinForTest, "bulk")
	taken[len(taken)-1].ID = fresh[0].ID
	if _, err := postgres.PushCopy(q, ctx, taken); !errors.Is(err, postgres.ErrConflict) {
		t.Fatalf("COPY with a taken ID = %v, want the conflict that sends it to INSERT", err)
	}
	if info, err := q.GetJob(ctx, taken[0].ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("a job of a failed COPY is stored: %+v, %v", info, err)
	}
}

const copyMinForTest = 250

// A batch with unique keys goes through the INSERT that skips duplicates
// job by job.
func TestPushManyUniqueKeys(t *testing.T) {
	t.Parallel()
	q := newQueue(t, testDSN(t))
	jobs := batch(300, "u")
	for i := range jobs {
		jobs[i].UniqueKey = fmt.Sprint(i % 150)
	}
	stored, err := q.PushMany(t.Context(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range stored {
		if s != (i < 150) {
			t.Fatalf("stored[%d] = %v, want %v", i, s, i < 150)
		}
	}
}
