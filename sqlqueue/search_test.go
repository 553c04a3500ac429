package sqlqueue_test

import (
	"fmt"
	"slices"
	"testing"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestSearchTimeBudget: a payload search that has used its time stops
// after its first window and says so, however many more jobs its row
// bound allows: 100 jobs on a first page (the default page's size
// rounded up), 1,000 when it goes on after a cursor; following Next
// reaches every match. The budget is zero here, so each call examines
// exactly one window whatever the machine's speed.
func TestSearchTimeBudget(t *testing.T) {
	eachDialect(t, func(t *testing.T, b backend) {
		q := newStore(t, b).queue(t)
		sqlqueue.SetSearchBudget(q, 0)
		jobs := make([]queue.Job, 1250)
		for i := range jobs {
			jobs[i] = queue.Job{ID: queue.NewID(), Queue: "tb", Name: "n", Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
			if i == 1180 {
				jobs[i].Payload = []byte(`{"needle":true}`)
			}
		}
		if stored, err := q.PushMany(t.Context(), jobs); err != nil || slices.Contains(stored, false) {
			t.Fatalf("PushMany = %v, %v", stored, err)
		}
		steps := []struct {
			jobs    []string
			scanned int
			next    bool
		}{
			{nil, 100, true},                    // jobs 1-100
			{nil, 1000, true},                   // jobs 101-1,100
			{[]string{jobs[1180].ID}, 0, false}, // jobs 1,101-1,250: the end
		}
		f := queue.JobFilter{State: queue.StateReady, Search: "needle"}
		for i, w := range steps {
			page, err := q.ListJobs(t.Context(), f)
			if err != nil {
				t.Fatalf("search call %d: %v", i+1, err)
			}
			var got []string
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, w.jobs) || page.Scanned != w.scanned || (page.Next != "") != w.next {
				t.Fatalf("search call %d = jobs %v, Scanned %d, Next %q; want jobs %v, Scanned %d, a next cursor %v",
					i+1, got, page.Scanned, page.Next, w.jobs, w.scanned, w.next)
			}
			f.After = page.Next
		}
	})
}
