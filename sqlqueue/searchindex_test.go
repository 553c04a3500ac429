package sqlqueue_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestSearchIndexMatchesScan: with the search index on, a search finds
// exactly the jobs the scan finds (every byte substring match, in list
// order), for payloads that are not UTF-8, hold NUL bytes or LIKE's
// metacharacters, and searches too short or too odd for the index; and a
// match deep in the queue comes on the first page in one call, where the
// scan with no time left stops after its first window. MySQL and MariaDB
// have no index and say so.
func TestSearchIndexMatchesScan(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t)
		payloads := [][]byte{
			[]byte(`{"user_id":42,"note":"needle in json"}`),
			[]byte("\xff\xfeneedle\x80\x81 binary"),
			[]byte("50% off_sale\\path"),
			[]byte("caf\xc3\xa9 latte"),
			[]byte("caf\xc3\xa9\xa9 stray continuation"),
			[]byte("nul\x00byte needle"),
			[]byte(`\\201 escaped text`),
			[]byte("\x81 high byte"),
			[]byte("NEEDLE upper"),
		}
		var jobs []queue.Job
		for i := range 600 {
			p := fmt.Appendf(nil, `{"n":%d}`, i)
			if i%61 == 60 {
				p = payloads[(i/61)%len(payloads)]
			}
			jobs = append(jobs, queue.Job{ID: queue.NewID(), Queue: "si", Name: "n", Payload: p})
		}
		if stored, err := q.PushMany(t.Context(), jobs); err != nil || slices.Contains(stored, false) {
			t.Fatalf("PushMany = %v, %v", stored, err)
		}
		searches := []string{"needle", "NEEDLE", "café", "caf\xc3\xa9", "é latte", "\xff\xfene", "50%", "% off_", "_sale\\pa", "\\path",
			"\x81", "\\201", "l\x00byte", "n\":4", `{"n":5`, "no such thing", "ne", "json", "user_id\":42"}
		all := func(t *testing.T) map[string][]string {
			got := map[string][]string{}
			for _, s := range searches {
				f := queue.JobFilter{State: queue.StateReady, Queue: "si", Search: s, Limit: 7}
				for {
					page, err := q.ListJobs(t.Context(), f)
					if err != nil {
						t.Fatalf("search %q: %v", s, err)
					}
					for _, j := range page.Jobs {
						got[s] = append(got[s], j.ID)
					}
					if page.Next == "" {
						break
					}
					f.After = page.Next
				}
			}
			return got
		}
		matches := func() map[string][]string {
			want := map[string][]string{}
			for _, s := range searches {
				for _, j := range jobs {
					if bytes.Contains(j.Payload, []byte(s)) {
						want[s] = append(want[s], j.ID)
					}
				}
			}
			return want
		}
		want := matches()
		scan := all(t)
		for _, s := range searches {
			if !slices.Equal(scan[s], want[s]) {
				t.Errorf("scan for %q = %v, want %v", s, scan[s], want[s])
			}
		}
		err := q.EnableSearchIndex(t.Context())
		if b.dialect == sqlqueue.MySQL {
			if !errors.Is(err, queue.ErrUnsupported) {
				t.Fatalf("EnableSearchIndex on MySQL = %v, want ErrUnsupported", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if on, err := q.SearchIndexEnabled(t.Context()); err != nil || !on {
			t.Fatalf("SearchIndexEnabled = %v, %v after EnableSearchIndex", on, err)
		}
		if err := q.EnableSearchIndex(t.Context()); err != nil {
			t.Fatalf("EnableSearchIndex again: %v", err)
		}
		// Jobs written after the index: the triggers keep it current.
		late := queue.Job{ID: queue.NewID(), Queue: "si", Name: "n", Payload: []byte("late needle")}
		if err := q.Push(t.Context(), late); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, late)
		want = matches()
		indexed := all(t)
		for _, s := range searches {
			if !slices.Equal(indexed[s], want[s]) {
				t.Errorf("indexed search for %q = %v, want %v (the scan's)", s, indexed[s], want[s])
			}
		}
		// With no time left the scan stops after its first window; the
		// index finds the deep matches in the same call.
		sqlqueue.SetSearchBudget(q, 0)
		page, err := q.ListJobs(t.Context(), queue.JobFilter{State: queue.StateReady, Queue: "si", Search: "needle"})
		if err != nil || len(page.Jobs) != len(want["needle"]) || page.Scanned != 0 {
			t.Fatalf("one indexed call = %d jobs, Scanned %d, %v; want %d, 0", len(page.Jobs), page.Scanned, err, len(want["needle"]))
		}
		if err := q.DisableSearchIndex(t.Context()); err != nil {
			t.Fatal(err)
		}
		if on, err := q.SearchIndexEnabled(t.Context()); err != nil || on {
			t.Fatalf("SearchIndexEnabled = %v, %v after DisableSearchIndex", on, err)
		}
		if err := q.Push(t.Context(), queue.Job{ID: queue.NewID(), Queue: "si", Name: "n", Payload: []byte("x")}); err != nil {
			t.Fatalf("Push after DisableSearchIndex: %v", err)
		}
	})
}
