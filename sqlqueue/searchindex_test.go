package sqlqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestSearchIndexMatchesScan: with the search index on, a search finds
// exactly the jobs the scan finds (every byte substring match, in list
// order), for payloads that are not UTF-8, hold NUL bytes or LIKE's
// metacharacters, and searches too short or too odd for the index; and a
// match deep in the queue comes on the first page in one call, where the
// scan with no time left stops after its first window. On MySQL it needs
// MariaDB's Mroonga engine (see noMroonga).
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
		if b.dialect == sqlqueue.MySQL && errors.Is(err, queue.ErrUnsupported) {
			noMroonga(t, err)
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

// noMroonga ends a test of the MySQL dialect's search index on a server
// without MariaDB's Mroonga engine (err says why): a skip, except under
// CI, whose script installs the engine's plugin.
func noMroonga(t *testing.T, err error) {
	t.Helper()
	if testutil.CI() {
		t.Fatalf("EnableSearchIndex on MariaDB under CI: %v (.ci/run installs mariadb-plugin-mroonga)", err)
	}
	t.Skipf("no payload search index on this MySQL server: %v", err)
}

// TestSearchIndexMariaDBPrunes: on MariaDB the index's Mroonga table is
// not transactional, so a deleted job's rows go when the maintenance
// pass prunes the deletions noted in the jobs' transactions; a delete
// that rolls back leaves the job found, and the prune removes exactly
// the rows of the jobs gone.
func TestSearchIndexMariaDBPrunes(t *testing.T) {
	b := serverBackend(t, sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN")
	s := newStore(t, b)
	q, db := s.open(t)
	ctx := t.Context()
	if err := q.EnableSearchIndex(ctx); errors.Is(err, queue.ErrUnsupported) {
		noMroonga(t, err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.DisableSearchIndex(context.Background()) })
	// The 40 matches lie after 300 jobs that do not match, past the
	// scan's first window, so the index finds them (no time is left for
	// a second window).
	var fill, jobs []queue.Job
	for i := range 300 {
		fill = append(fill, queue.Job{ID: queue.NewID(), Queue: "p", Name: "n", Payload: fmt.Appendf(nil, "hay %d", i)})
	}
	for i := range 40 {
		jobs = append(jobs, queue.Job{ID: queue.NewID(), Queue: "p", Name: "n", Payload: fmt.Appendf(nil, "needle %d", i)})
	}
	for _, js := range [][]queue.Job{fill, jobs} {
		if _, err := q.PushMany(ctx, js); err != nil {
			t.Fatal(err)
		}
	}
	count := func(table string) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.table+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	found := func() int {
		t.Helper()
		page, err := q.ListJobs(ctx, queue.JobFilter{State: queue.StateReady, Queue: "p", Search: "needle", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Jobs)
	}
	// A delete rolled back: the job stays, and so do its index rows.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+s.table+" WHERE id = ?", jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	sqlqueue.SetSearchBudget(q, 0)
	if n := found(); n != 40 {
		t.Fatalf("after a rolled-back delete and a prune, the search finds %d jobs, want 40", n)
	}
	got, err := q.Reserve(ctx, []string{"p"}, 325, time.Minute)
	if err != nil || len(got) != 325 {
		t.Fatalf("Reserve = %d jobs, %v; want 325", len(got), err)
	}
	var leases []queue.Lease
	for _, j := range got {
		if bytes.HasPrefix(j.Payload, []byte("needle")) {
			leases = append(leases, j.Lease())
		}
	}
	if lost, err := testutil.AckMany(ctx, q, leases); err != nil || len(lost) != 0 {
		t.Fatalf("AckMany = lost %v, %v", lost, err)
	}
	if side, gone := count("_search"), count("_search_gone"); side != 340 || gone != 25 {
		t.Fatalf("after 25 acks: %d index rows and %d noted deletions, want 340 and 25", side, gone)
	}
	if _, _, err := q.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if side, gone := count("_search"), count("_search_gone"); side != 315 || gone != 0 {
		t.Fatalf("after the prune: %d index rows and %d noted deletions, want 315 and 0", side, gone)
	}
	if n := found(); n != 15 {
		t.Fatalf("the search finds %d jobs, want the 15 left", n)
	}
}
