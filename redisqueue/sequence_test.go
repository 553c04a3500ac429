package redisqueue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// TestSequenceKeys checks what the sequence scripts leave in Redis: a
// waiting member reads as sequenced, and once every member has ended by
// each path that ends a head (ack, cancel, release on dead, forget,
// purge), no sequence key is left behind; jobs outside sequences never
// make one.
func TestSequenceKeys(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	member := func(key string, release bool) queue.Job {
		j := queue.Job{ID: driver.NewID(), Queue: "sk", Name: "step", Meta: map[string]string{driver.MetaSequence: key}}
		if release {
			j.Meta[driver.MetaSequenceRelease] = "dead"
		}
		return j
	}
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, q *redisqueue.Queue, head queue.Job)
	}{
		{"Ack", func(t *testing.T, q *redisqueue.Queue, head queue.Job) {
			endSeq(t, q, head, driver.OutcomeDone)
		}},
		{"Cancel", func(t *testing.T, q *redisqueue.Queue, head queue.Job) {
			if _, err := q.Cancel(t.Context(), head.ID); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
		}},
		{"ReleaseOnDeadThenForget", func(t *testing.T, q *redisqueue.Queue, head queue.Job) {
			endSeq(t, q, head, driver.OutcomeFailed)
			if err := q.ForgetDead(t.Context(), head.ID); err != nil {
				t.Fatalf("ForgetDead: %v", err)
			}
		}},
		{"OperatorReleaseThenFlush", func(t *testing.T, q *redisqueue.Queue, head queue.Job) {
			// Failed without ReleaseOnDead: the dead head holds.
			complete(t, q, driver.Completion{Lease: head.Lease(), Outcome: driver.OutcomeFailed, Sequence: head.Meta[driver.MetaSequence]})
			if got := reserveSeq(t, q); len(got) != 0 {
				t.Fatalf("a dead head that holds let %v run", got)
			}
			if err := q.ReleaseSequence(t.Context(), "sk", head.Meta[driver.MetaSequence]); err != nil {
				t.Fatalf("ReleaseSequence: %v", err)
			}
			if _, err := q.FlushDead(t.Context(), "sk"); err != nil {
				t.Fatalf("FlushDead: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := prefix(t, rdb)
			q := newQueue(t, rdb, p)
			ctx := t.Context()
			plain := queue.Job{ID: driver.NewID(), Queue: "sk", Name: "plain"}
			if err := q.Push(ctx, plain); err != nil {
				t.Fatal(err)
			}
			if keys := seqKeys(t, rdb, p); len(keys) != 0 {
				t.Fatalf("a job outside sequences made the keys %q", keys)
			}
			ms := []queue.Job{member("k", true), member("k", true), member("k", true)}
			for _, m := range ms {
				if err := q.Push(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			if ji, err := q.GetJob(ctx, ms[1].ID); err != nil || ji.State != driver.StateSequenced {
				t.Fatalf("GetJob(waiting member) = %q, %v; want sequenced", ji.State, err)
			}
			if n, err := q.Len(ctx, "sk"); err != nil || n != 4 {
				t.Fatalf("Len = %d, %v; want 4", n, err)
			}
			for i, m := range ms[:2] {
				got := reserveSeq(t, q)
				if len(got) != 1 || got[0].ID != m.ID {
					t.Fatalf("step %d: reserved %v, want only %s", i, got, m.ID)
				}
				tc.end(t, q, got[0])
			}
			// The last member is left to Purge.
			if n, err := q.Purge(ctx, "sk"); err != nil || n != 1 {
				t.Fatalf("Purge = %d, %v; want the last member", n, err)
			}
			if keys := seqKeys(t, rdb, p); len(keys) != 0 {
				t.Errorf("after every member ended, keys %q are left", keys)
			}
		})
	}
}

// reserveSeq reserves every job of queue sk but the job named plain,
// which it acks.
func reserveSeq(t *testing.T, q *redisqueue.Queue) []queue.Job {
	t.Helper()
	jobs, err := q.Reserve(t.Context(), []string{"sk"}, 10, time.Minute)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	var out []queue.Job
	for _, j := range jobs {
		if j.Name == "plain" {
			endSeq(t, q, j, driver.OutcomeDone)
			continue
		}
		out = append(out, j)
	}
	return out
}

// endSeq ends j with outcome o as the Worker does: with its sequence.
func endSeq(t *testing.T, q *redisqueue.Queue, j queue.Job, o driver.Outcome) {
	t.Helper()
	c := driver.Completion{Lease: j.Lease(), Outcome: o}
	c.Sequence, c.ReleaseOnDead = driver.SequenceOf(j)
	complete(t, q, c)
}

// seqKeys returns the sequence keys (lists and waiting sets) under
// prefix p.
func seqKeys(t *testing.T, rdb *redis.Client, p string) []string {
	t.Helper()
	keys, err := rdb.Keys(t.Context(), "{"+p+"[:}]*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if strings.Contains(k, ":sl:") || strings.HasSuffix(k, ":sqw") {
			out = append(out, k)
		}
	}
	return out
}
