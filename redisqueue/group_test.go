package redisqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// groupMember returns a member of group key named "note" whose CreatedAt is
// age before now: the rule reads a group's times from its members'
// CreatedAt, so a test sets how old a group is without waiting.
func groupMember(key string, n int, age time.Duration) queue.Job {
	return queue.Job{
		Queue: "grp", Name: "note", Payload: []byte{'0' + byte(n)},
		Meta: map[string]string{driver.MetaGroup: key}, CreatedAt: time.Now().Add(-age),
	}
}

// TestGroupRule checks the rule on Redis' indexes of groups: the newest
// member's age against Grace, the oldest's against MaxDelay, the size
// against MaxSize; a cancelled newest member no longer holds its group
// back; a set takes the oldest members and leaves the rest grouped.
func TestGroupRule(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	for _, tc := range []struct {
		name   string
		rule   driver.GroupRule
		ages   []time.Duration // of the members, in push order
		cancel int             // index of a member to cancel first, or -1
		want   [][]byte        // the payloads of the set made, nil: none
		left   int             // members still grouped after
	}{
		{"GraceNotPassed", driver.GroupRule{Grace: time.Hour}, []time.Duration{2 * time.Hour, 0}, -1, nil, 2},
		{"GracePassed", driver.GroupRule{Grace: time.Hour}, []time.Duration{3 * time.Hour, 2 * time.Hour}, -1, [][]byte{[]byte("[0,1]")}, 0},
		{"CancelledNewest", driver.GroupRule{Grace: time.Hour}, []time.Duration{2 * time.Hour, 0}, 1, [][]byte{[]byte("[0]")}, 0},
		{"CancelledOldest", driver.GroupRule{Grace: time.Minute, MaxDelay: time.Hour}, []time.Duration{2 * time.Hour, 0}, 0, nil, 1},
		{"MaxDelay", driver.GroupRule{Grace: time.Hour, MaxDelay: 90 * time.Minute}, []time.Duration{2 * time.Hour, 0}, -1, [][]byte{[]byte("[0,1]")}, 0},
		{"SizeLeavesRest", driver.GroupRule{Grace: time.Hour, MaxSize: 2}, []time.Duration{0, 0, 0}, -1, [][]byte{[]byte("[0,1]")}, 1},
		{"GraceTakesAllInSets", driver.GroupRule{Grace: time.Hour, MaxSize: 2}, []time.Duration{3 * time.Hour, 3 * time.Hour, 2 * time.Hour}, -1, [][]byte{[]byte("[0,1]"), []byte("[2]")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue(t, rdb, prefix(t, rdb))
			ctx := t.Context()
			var ids []string
			for i, age := range tc.ages {
				j := groupMember("g", i, age)
				j.ID = driver.NewID()
				if err := q.Push(ctx, j); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			if tc.cancel >= 0 {
				if was, err := q.Cancel(ctx, ids[tc.cancel]); err != nil || was != driver.StateGrouped {
					t.Fatalf("Cancel = %q, %v; want grouped", was, err)
				}
			}
			rule, err := tc.rule.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			if n, err := q.GatherGroups(ctx, []string{"grp"}, "note", rule); err != nil || n != len(tc.want) {
				t.Fatalf("GatherGroups = %d, %v; want %d sets", n, err, len(tc.want))
			}
			jobs, err := q.Reserve(ctx, []string{"grp"}, 10, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]byte
			for _, j := range jobs {
				got = append(got, j.Payload)
			}
			if !slices.EqualFunc(got, tc.want, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Errorf("sets %q, want %q", got, tc.want)
			}
			counts, err := q.Counts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var left int64
			for _, c := range counts {
				left += c.Grouped
			}
			if left != int64(tc.left) {
				t.Errorf("%d members grouped after, want %d", left, tc.left)
			}
		})
	}
}

// TestGroupKeysTidy checks that a group leaves no key behind once it has
// no member, however its members left (gathered, cancelled, purged): the
// indexes of groups hold only groups with members.
func TestGroupKeysTidy(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	ctx := t.Context()
	var ids []string
	for i, key := range []string{"a", "a", "b", "c", "c"} {
		j := groupMember(key, i, 0)
		j.ID = driver.NewID()
		if err := q.Push(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if _, err := q.Cancel(ctx, ids[2]); err != nil { // b's only member
		t.Fatal(err)
	}
	rule, _ := driver.GroupRule{Grace: time.Hour, MaxSize: 2}.Normalize()
	if n, err := q.GatherGroups(ctx, []string{"grp"}, "note", rule); err != nil || n != 2 {
		t.Fatalf("GatherGroups = %d, %v; want the sets of a and c", n, err)
	}
	if err := q.Push(ctx, groupMember("d", 9, 0)); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Purge(ctx, "grp"); err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want the two sets and d's member", n, err)
	}
	keys, err := rdb.Keys(ctx, "{"+p+":grp}:g*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("keys of groups left with no member: %v", keys)
	}
}

// TestHandleGroupWorkers runs two Workers on one prefix with a group
// handler: every member reaches one call, in a set of its own group only,
// never two sets.
func TestHandleGroupWorkers(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	type note struct {
		Key string
		N   int
	}
	var mu sync.Mutex
	seen := map[int]int{}
	var bad []string
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		q := newQueue(t, rdb, p)
		w := queue.NewWorker(q).Poll(20 * time.Millisecond).Slog(slog.New(slog.DiscardHandler))
		queue.HandleGroup(w, queue.GroupRule{Grace: 50 * time.Millisecond, MaxSize: 4}, func(ctx context.Context, vs []note) error {
			mu.Lock()
			defer mu.Unlock()
			if len(vs) > 4 {
				bad = append(bad, "a set above MaxSize")
			}
			for _, v := range vs {
				if v.Key != vs[0].Key {
					bad = append(bad, "a set of two groups")
				}
				seen[v.N]++
			}
			return nil
		})
		wg.Go(func() {
			if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Worker.Run: %v", err)
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	q := newQueue(t, rdb, p)
	const n = 40
	for i := range n {
		key := []string{"u1", "u2", "u3"}[i%3]
		if err := queue.Dispatch(t.Context(), q, note{key, i}, queue.Group(key)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	}, "every member handled")
	mu.Lock()
	defer mu.Unlock()
	for k, c := range seen {
		if c != 1 {
			t.Errorf("member %d handled %d times, want once", k, c)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%v", bad)
	}
	b, _ := json.Marshal(seen)
	t.Logf("handled: %s", b)
}
