package contracttest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// testTagMonitor checks the rules of monitored tags (driver.TagMonitor):
// the tags CheckTag refuses and the MaxMonitoredTags bound, records kept
// per tag apart from the jobs, one per job and list, newest first, the
// MaxTaggedJobs bound on each list, and unmonitoring that drops them.
func (s *suite) testTagMonitor(t *testing.T) {
	checkAs(s, t, "MonitorAndList", func(t *testing.T, q queue.Queue, tm driver.TagMonitor) {
		ctx := t.Context()
		for _, tag := range []string{"b", "a", "a", "customer:42"} {
			if err := tm.MonitorTag(ctx, tag); err != nil {
				t.Fatalf("MonitorTag(%q): %v", tag, err)
			}
		}
		for _, bad := range []string{"", strings.Repeat("x", driver.MaxKeyBytes+1), "a\x00b", "\xff"} {
			if err := tm.MonitorTag(ctx, bad); !errors.Is(err, queue.ErrInvalid) {
				t.Errorf("MonitorTag(%.20q) = %v, want an error matching ErrInvalid", bad, err)
			}
		}
		if err := tm.UnmonitorTag(ctx, "never-monitored"); err != nil {
			t.Errorf("UnmonitorTag of a tag not monitored = %v, want nil", err)
		}
		if err := tm.UnmonitorTag(ctx, "b"); err != nil {
			t.Fatalf("UnmonitorTag: %v", err)
		}
		got, err := tm.MonitoredTags(ctx)
		if want := []string{"a", "customer:42"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("MonitoredTags = %q, %v; want %q", got, err, want)
		}
		if s.h.Peer != nil {
			peer, ok := s.h.Peer(t, q).(driver.TagMonitor)
			if !ok {
				t.Fatal("the peer handle is no TagMonitor")
			}
			if got, err := peer.MonitoredTags(ctx); err != nil || !slices.Equal(got, []string{"a", "customer:42"}) {
				t.Errorf("the peer's MonitoredTags = %q, %v; want the same tags", got, err)
			}
		}
	})

	checkAs(s, t, "MonitoredBound", func(t *testing.T, q queue.Queue, tm driver.TagMonitor) {
		ctx := t.Context()
		for i := range driver.MaxMonitoredTags {
			if err := tm.MonitorTag(ctx, fmt.Sprintf("tag-%03d", i)); err != nil {
				t.Fatalf("MonitorTag of tag %d: %v", i, err)
			}
		}
		if err := tm.MonitorTag(ctx, "one-too-many"); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("MonitorTag past MaxMonitoredTags = %v, want an error matching ErrInvalid", err)
		}
		if err := tm.MonitorTag(ctx, "tag-007"); err != nil {
			t.Errorf("MonitorTag of a monitored tag at the bound = %v, want nil", err)
		}
		got, err := tm.MonitoredTags(ctx)
		if err != nil || len(got) != driver.MaxMonitoredTags {
			t.Errorf("MonitoredTags has %d tags, %v; want %d", len(got), err, driver.MaxMonitoredTags)
		}
	})

	checkAs(s, t, "Records", func(t *testing.T, q queue.Queue, tm driver.TagMonitor) {
		ctx := t.Context()
		if err := tm.MonitorTag(ctx, "watched"); err != nil {
			t.Fatal(err)
		}
		at := time.Now().UTC().Truncate(time.Millisecond)
		rec := func(tag, id string, state driver.JobState, d time.Duration, errMsg string) driver.TaggedJob {
			return driver.TaggedJob{Tag: tag, ID: id, Queue: "q-" + id, Name: "Job" + id, State: state,
				At: at.Add(d), Attempts: 2, Error: errMsg}
		}
		first := []driver.TaggedJob{
			rec("watched", "j1", driver.StateScheduled, 0, "timeout"),
			rec("watched", "j2", driver.StateDead, time.Second, "boom ünïcode"),
			rec("unwatched", "j3", driver.StateDone, 0, ""),
		}
		if err := tm.RecordTagged(ctx, first); err != nil {
			t.Fatalf("RecordTagged: %v", err)
		}
		// j1's retry succeeded later, and j4 equals j2's time: by ID, j4 first.
		if err := tm.RecordTagged(ctx, []driver.TaggedJob{
			rec("watched", "j1", driver.StateDone, 2*time.Second, ""),
			rec("watched", "j4", driver.StateCancelled, time.Second, queue.ErrCancelled.Error()),
		}); err != nil {
			t.Fatalf("RecordTagged: %v", err)
		}
		recent, err := tm.TaggedJobs(ctx, "watched", false)
		if err != nil {
			t.Fatalf("TaggedJobs: %v", err)
		}
		want := []driver.TaggedJob{
			rec("watched", "j1", driver.StateDone, 2*time.Second, ""),
			rec("watched", "j4", driver.StateCancelled, time.Second, queue.ErrCancelled.Error()),
			rec("watched", "j2", driver.StateDead, time.Second, "boom ünïcode"),
		}
		s.wantTagged(t, "the recent list", recent, want)
		failed, err := tm.TaggedJobs(ctx, "watched", true)
		if err != nil {
			t.Fatalf("TaggedJobs(failed): %v", err)
		}
		s.wantTagged(t, "the failed list", failed, want[2:])
		if got, err := tm.TaggedJobs(ctx, "unwatched", false); err != nil || len(got) != 0 {
			t.Errorf("TaggedJobs of a tag not monitored = %+v, %v; want none", got, err)
		}

		if err := tm.UnmonitorTag(ctx, "watched"); err != nil {
			t.Fatal(err)
		}
		if err := tm.MonitorTag(ctx, "watched"); err != nil {
			t.Fatal(err)
		}
		if got, err := tm.TaggedJobs(ctx, "watched", false); err != nil || len(got) != 0 {
			t.Errorf("TaggedJobs after unmonitoring and monitoring again = %d records, %v; want none", len(got), err)
		}
	})

	checkAs(s, t, "Bound", func(t *testing.T, q queue.Queue, tm driver.TagMonitor) {
		ctx := t.Context()
		if err := tm.MonitorTag(ctx, "busy"); err != nil {
			t.Fatal(err)
		}
		at := time.Now().UTC().Truncate(time.Millisecond)
		// Three failures, then more successes than a list keeps, in two
		// calls: the failures leave the recent list but stay in the failed one.
		var recs []driver.TaggedJob
		for i := range 3 {
			recs = append(recs, driver.TaggedJob{Tag: "busy", ID: fmt.Sprintf("dead-%d", i), Queue: "q", Name: "N",
				State: driver.StateDead, At: at.Add(time.Duration(i) * time.Millisecond), Attempts: 1, Error: "e"})
		}
		n := driver.MaxTaggedJobs + 5
		for i := range n {
			recs = append(recs, driver.TaggedJob{Tag: "busy", ID: fmt.Sprintf("ok-%05d", i), Queue: "q", Name: "N",
				State: driver.StateDone, At: at.Add(time.Second + time.Duration(i)*time.Millisecond), Attempts: 1})
		}
		half := len(recs) / 2
		for _, part := range [][]driver.TaggedJob{recs[:half], recs[half:]} {
			if err := tm.RecordTagged(ctx, part); err != nil {
				t.Fatalf("RecordTagged of %d records: %v", len(part), err)
			}
		}
		recent, err := tm.TaggedJobs(ctx, "busy", false)
		if err != nil {
			t.Fatal(err)
		}
		if len(recent) != driver.MaxTaggedJobs || recent[0].ID != fmt.Sprintf("ok-%05d", n-1) ||
			recent[len(recent)-1].ID != fmt.Sprintf("ok-%05d", n-driver.MaxTaggedJobs) {
			first, last := "", ""
			if len(recent) > 0 {
				first, last = recent[0].ID, recent[len(recent)-1].ID
			}
			t.Errorf("the recent list holds %d records from %s to %s; want the last %d, ok-%05d to ok-%05d",
				len(recent), first, last, driver.MaxTaggedJobs, n-1, n-driver.MaxTaggedJobs)
		}
		failed, err := tm.TaggedJobs(ctx, "busy", true)
		if err != nil || len(failed) != 3 || failed[0].ID != "dead-2" {
			t.Errorf("the failed list = %d records, %v; want the 3 failures, newest first", len(failed), err)
		}
	})
}

// wantTagged compares records, with At within the driver's precision.
func (s *suite) wantTagged(t *testing.T, what string, got, want []driver.TaggedJob) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if d := g.At.Sub(w.At).Abs(); d > s.tol {
			t.Errorf("%s[%d].At = %v, want %v", what, i, g.At, w.At)
		}
		g.At = w.At
		if g != w {
			t.Errorf("%s[%d] = %+v, want %+v", what, i, g, w)
		}
	}
}
