package memqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestGroupRule follows one group on a clock the test moves: each member
// starts the grace again, MaxDelay bounds the wait from the oldest member,
// and a gather takes every member pushed before it.
func TestGroupRule(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		rule   driver.GroupRule
		pushes []time.Duration // after t0
		notAt  time.Duration   // a gather at t0+notAt makes no set
		dueAt  time.Duration   // a gather at t0+dueAt makes one set
	}{
		{"GraceFromFirst", driver.GroupRule{Grace: time.Minute}, []time.Duration{0}, 59 * time.Second, time.Minute},
		{"GraceResetByMember", driver.GroupRule{Grace: time.Minute}, []time.Duration{0, 40 * time.Second}, 99 * time.Second, 100 * time.Second},
		{"MaxDelayBoundsResets", driver.GroupRule{Grace: time.Minute, MaxDelay: 90 * time.Second},
			[]time.Duration{0, 40 * time.Second, 80 * time.Second}, 89 * time.Second, 90 * time.Second},
		{"SizeAtOnce", driver.GroupRule{Grace: time.Hour, MaxSize: 2}, []time.Duration{0, time.Second}, 0, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			now := t0
			set := func(d time.Duration) { mu.Lock(); now = t0.Add(d); mu.Unlock() }
			q := memqueue.New(memqueue.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
			ctx := context.Background()
			rule, err := tc.rule.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range tc.pushes {
				set(d)
				if err := q.Push(ctx, queue.Job{Name: "note", Payload: []byte{'0' + byte(i)}, Meta: map[string]string{driver.MetaGroup: "g"}}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.notAt > tc.pushes[len(tc.pushes)-1] {
				set(tc.notAt)
				if n, err := q.GatherGroups(ctx, nil, "note", rule); err != nil || n != 0 {
					t.Fatalf("gather at +%v = %d sets, %v; want none", tc.notAt, n, err)
				}
			}
			set(tc.dueAt)
			if n, err := q.GatherGroups(ctx, nil, "note", rule); err != nil || n != 1 {
				t.Fatalf("gather at +%v = %d sets, %v; want one", tc.dueAt, n, err)
			}
			jobs, err := q.Reserve(ctx, nil, 10, time.Minute)
			if err != nil || len(jobs) != 1 || len(jobs[0].Payload) != 2*len(tc.pushes)+1 {
				t.Fatalf("Reserve = %d jobs, %v; want the set of %d", len(jobs), err, len(tc.pushes))
			}
		})
	}
}
