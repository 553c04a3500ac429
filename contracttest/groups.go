package contracttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// member returns a new job of queueName in group key.
func member(queueName, key string) queue.Job {
	j := newJob(queueName)
	j.Meta = map[string]string{driver.MetaGroup: key}
	return j
}

// setMembers returns the n of each member a set's payload holds, in order.
func setMembers(t *testing.T, set queue.Job) []int {
	t.Helper()
	var ms []struct{ N int }
	if err := json.Unmarshal(set.Payload, &ms); err != nil {
		t.Fatalf("set %s: payload %q is not an array of members: %v", set.ID, set.Payload, err)
	}
	out := make([]int, len(ms))
	for i, m := range ms {
		out[i] = m.N
	}
	return out
}

// payloadN returns the n of a job newJob made.
func payloadN(t *testing.T, j queue.Job) int {
	t.Helper()
	var m struct{ N int }
	if err := json.Unmarshal(j.Payload, &m); err != nil {
		t.Fatalf("job %s: payload %q: %v", j.ID, j.Payload, err)
	}
	return m.N
}

// gather calls GatherGroups and returns how many sets it made.
func gather(t *testing.T, g driver.Grouper, queues []string, name string, r driver.GroupRule) int {
	t.Helper()
	r, err := r.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	n, err := g.GatherGroups(t.Context(), queues, name, r)
	if err != nil {
		t.Fatalf("GatherGroups(%q, %s): %v", queues, name, err)
	}
	return n
}

// testGroups checks driver.Grouper: members wait in StateGrouped and are
// never reserved on their own; a due group (by size, grace or max delay)
// becomes one ordinary job holding its members' payloads in push order;
// a group not due is left alone; concurrent gathers never put a member in
// two sets; the set is leased, handed out again after its lease expires,
// dead-lettered and retried as one job. Every store refuses a bad member
// the same way (Validate).
func (s *suite) testGroups(t *testing.T) {
	s.check(t, "BadMembersRefused", func(t *testing.T, q queue.Queue) {
		long := member("grp-bad", strings.Repeat("k", driver.MaxKeyBytes+1))
		empty := member("grp-bad", "")
		unique := member("grp-bad", "g")
		unique.UniqueKey = "u"
		notJSON := member("grp-bad", "g")
		notJSON.Payload = []byte("not json")
		for _, j := range []queue.Job{long, empty, unique, notJSON} {
			if err := q.Push(t.Context(), j); !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("Push(member %+v) = %v, want ErrInvalid", j.Meta, err)
			}
			if _, err := q.PushMany(t.Context(), []queue.Job{newJob("grp-bad"), j}); !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("PushMany(member %+v) = %v, want ErrInvalid", j.Meta, err)
			}
		}
		wantLen(t, q, "grp-bad", 0)
	})
	checkAs(s, t, "MembersWaitGrouped", func(t *testing.T, q queue.Queue, g driver.Grouper) {
		ms := []queue.Job{member("grp-wait", "g"), member("grp-wait", "g"), member("grp-wait", "h")}
		for _, m := range ms {
			push(t, q, m)
		}
		plain := newJob("grp-wait")
		push(t, q, plain)
		wantLen(t, q, "grp-wait", 4)
		got := reserve(t, q, []string{"grp-wait"}, 10, longLease)
		if len(got) != 1 || got[0].ID != plain.ID {
			t.Fatalf("Reserve gave %d jobs, want only the job without a group", len(got))
		}
		if n := gather(t, g, []string{"grp-wait"}, "contract", driver.GroupRule{Grace: time.Hour, MaxSize: 3}); n != 0 {
			t.Fatalf("GatherGroups made %d sets of groups not due, want 0", n)
		}
		if err := q.Push(t.Context(), ms[0]); !errors.Is(err, queue.ErrDuplicate) {
			t.Errorf("Push of a waiting member's ID = %v, want ErrDuplicate", err)
		}
		in := inspector(q)
		if in == nil {
			return
		}
		info, err := in.GetJob(t.Context(), ms[0].ID)
		if err != nil {
			t.Fatalf("GetJob(member): %v", err)
		}
		if info.State != driver.StateGrouped || driver.GroupKeyOf(info.Job) != "g" {
			t.Errorf("GetJob(member) = state %q, group %q; want grouped, g", info.State, driver.GroupKeyOf(info.Job))
		}
		page, err := in.ListJobs(t.Context(), driver.JobFilter{State: driver.StateGrouped, Queue: "grp-wait"})
		if err != nil {
			t.Fatalf("ListJobs(grouped): %v", err)
		}
		if len(page.Jobs) != 3 {
			t.Errorf("ListJobs(grouped) listed %d jobs, want 3", len(page.Jobs))
		}
		counts, err := in.Counts(t.Context())
		if err != nil {
			t.Fatalf("Counts: %v", err)
		}
		for _, c := range counts {
			if c.Queue == "grp-wait" && c.Grouped != 3 {
				t.Errorf("Counts: %d grouped, want 3", c.Grouped)
			}
		}
	})
	checkAs(s, t, "SizeMakesSets", func(t *testing.T, q queue.Queue, g driver.Grouper) {
		var gs, hs []queue.Job
		for range 5 {
			gs = append(gs, member("grp-size", "g"))
			push(t, q, gs[len(gs)-1])
		}
		for range 2 {
			hs = append(hs, member("grp-size", "h"))
			push(t, q, hs[len(hs)-1])
		}
		other := member("grp-size", "g")
		other.Name = "contract-other"
		push(t, q, other)
		if n := gather(t, g, []string{"grp-size"}, "contract", driver.GroupRule{Grace: time.Hour, MaxSize: 2}); n != 3 {
			t.Fatalf("GatherGroups made %d sets, want 3 (two of g, one of h)", n)
		}
		if n := gather(t, g, []string{"grp-size"}, "contract", driver.GroupRule{Grace: time.Hour, MaxSize: 2}); n != 0 {
			t.Fatalf("a second GatherGroups made %d sets, want 0 (one member of g left)", n)
		}
		wantLen(t, q, "grp-size", 3+1+1)
		sets := reserve(t, q, []string{"grp-size"}, 10, longLease)
		if len(sets) != 3 {
			t.Fatalf("reserved %d sets, want 3", len(sets))
		}
		want := map[string][][]int{
			"g": {{payloadN(t, gs[0]), payloadN(t, gs[1])}, {payloadN(t, gs[2]), payloadN(t, gs[3])}},
			"h": {{payloadN(t, hs[0]), payloadN(t, hs[1])}},
		}
		got := map[string][][]int{}
		for _, set := range sets {
			if set.Name != "contract" || set.Meta[driver.MetaGroupSize] != "2" || driver.GroupKeyOf(set) != "" {
				t.Errorf("set %s: name %q, meta %v; want contract, size 2, no MetaGroup", set.ID, set.Name, set.Meta)
			}
			key := set.Meta[driver.MetaGroupOf]
			got[key] = append(got[key], setMembers(t, set))
		}
		for _, k := range []string{"g", "h"} {
			slices.SortFunc(got[k], slices.Compare)
			if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
				t.Errorf("sets of %s hold %v, want %v (oldest first)", k, got[k], want[k])
			}
		}
		if in := inspector(q); in != nil {
			if _, err := in.GetJob(t.Context(), gs[0].ID); !errors.Is(err, queue.ErrNotFound) {
				t.Errorf("GetJob(gathered member) = %v, want ErrNotFound", err)
			}
		}
		for _, set := range sets {
			ack(t, q, set)
		}
		wantLen(t, q, "grp-size", 2)
	})
	checkAs(s, t, "GraceAndMaxDelay", func(t *testing.T, q queue.Queue, g driver.Grouper) {
		push(t, q, member("grp-grace", "g"))
		push(t, q, member("grp-delay", "g"))
		for _, c := range []struct {
			queue string
			rule  driver.GroupRule
		}{
			{"grp-grace", driver.GroupRule{Grace: time.Millisecond}},
			{"grp-delay", driver.GroupRule{Grace: time.Hour, MaxDelay: time.Millisecond}},
		} {
			eventually(t, fmt.Sprintf("a set of %s under %+v", c.queue, c.rule), func() bool {
				return gather(t, g, []string{c.queue}, "contract", c.rule) > 0
			})
			if got := reserve(t, q, []string{c.queue}, 10, longLease); len(got) != 1 || len(setMembers(t, got[0])) != 1 {
				t.Fatalf("%s: reserved %d jobs, want one set of one", c.queue, len(got))
			}
		}
	})
	checkAs(s, t, "ConcurrentGathersOnce", func(t *testing.T, q queue.Queue, g driver.Grouper) {
		const n = 60
		want := make([]int, 0, n)
		for range n {
			m := member("grp-race", "g")
			push(t, q, m)
			want = append(want, payloadN(t, m))
		}
		gs := []driver.Grouper{g, g}
		if s.h.Peer != nil {
			if p, ok := s.h.Peer(t, q).(driver.Grouper); ok {
				gs = append(gs, p, p)
			}
		}
		rule, _ := driver.GroupRule{Grace: time.Hour, MaxSize: 7}.Normalize()
		var wg sync.WaitGroup
		for _, g := range gs {
			wg.Go(func() {
				for range n {
					if _, err := g.GatherGroups(t.Context(), []string{"grp-race"}, "contract", rule); err != nil {
						t.Errorf("GatherGroups: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		var got []int
		for {
			sets := reserve(t, q, []string{"grp-race"}, 100, longLease)
			if len(sets) == 0 {
				break
			}
			for _, set := range sets {
				ms := setMembers(t, set)
				if len(ms) > 7 {
					t.Errorf("set %s holds %d members, more than MaxSize 7", set.ID, len(ms))
				}
				got = append(got, ms...)
			}
		}
		// 60 members in sets of 7: 8 full sets, 4 members wait.
		if len(got) != 56 {
			t.Errorf("sets hold %d members, want 56", len(got))
		}
		slices.Sort(got)
		if len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("a member is in two sets: %v", got)
		} else if !slices.Equal(got, want[:len(got)]) {
			t.Errorf("sets hold members %v, want the oldest %d: %v", got, len(got), want[:len(got)])
		}
		wantLen(t, q, "grp-race", 56/7+4)
	})
	checkAs(s, t, "SetIsOneJob", func(t *testing.T, q queue.Queue, g driver.Grouper) {
		for range 3 {
			push(t, q, member("grp-job", "g"))
		}
		if n := gather(t, g, []string{"grp-job"}, "contract", driver.GroupRule{MaxSize: 3}); n != 1 {
			t.Fatalf("GatherGroups made %d sets, want 1", n)
		}
		first := reserve(t, q, []string{"grp-job"}, 10, shortLease)
		if len(first) != 1 {
			t.Fatalf("reserved %d jobs, want the set", len(first))
		}
		var again []queue.Job
		eventually(t, "the set handed out again after its lease's end", func() bool {
			again = reserve(t, q, []string{"grp-job"}, 10, longLease)
			return len(again) > 0
		})
		if len(again) != 1 || again[0].ID != first[0].ID || string(again[0].Payload) != string(first[0].Payload) {
			t.Fatalf("after its lease expired, Reserve gave %d jobs, want the same set", len(again))
		}
		fail(t, q, again[0], "digest failed")
		dead, err := q.DeadLetters(t.Context(), "grp-job", 10)
		if err != nil {
			t.Fatalf("DeadLetters: %v", err)
		}
		if len(dead) != 1 || len(setMembers(t, dead[0])) != 3 {
			t.Fatalf("DeadLetters = %d jobs, want the set of 3", len(dead))
		}
		if err := q.RetryDead(t.Context(), dead[0].ID); err != nil {
			t.Fatalf("RetryDead(set): %v", err)
		}
		back := reserve(t, q, []string{"grp-job"}, 10, longLease)
		if len(back) != 1 || len(setMembers(t, back[0])) != 3 || back[0].Meta[driver.MetaGroupOf] != "g" {
			t.Fatalf("after RetryDead, Reserve gave %d jobs, want the set of 3", len(back))
		}
		ack(t, q, back[0])
		wantLen(t, q, "grp-job", 0)
	})
	checkAs(s, t, "CancelPurgeMembers", func(t *testing.T, q queue.Queue, g driver.Grouper) {
		a, b := member("grp-purge", "g"), member("grp-purge", "g")
		push(t, q, a)
		push(t, q, b)
		if c := controller(q); c != nil {
			was, err := c.Cancel(t.Context(), a.ID)
			if err != nil || was != driver.StateGrouped {
				t.Fatalf("Cancel(member) = %q, %v; want grouped", was, err)
			}
		} else {
			push(t, q, member("grp-purge", "g"))
		}
		if n, err := q.Purge(t.Context(), "grp-purge"); err != nil || n != 1 && controller(q) != nil {
			t.Fatalf("Purge = %d, %v; want the member left", n, err)
		}
		wantLen(t, q, "grp-purge", 0)
		if n := gather(t, g, []string{"grp-purge"}, "contract", driver.GroupRule{MaxSize: 1}); n != 0 {
			t.Fatalf("GatherGroups after Purge made %d sets, want 0", n)
		}
	})
}
