package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// digestNote is the group member of TestGroupsShown.
type digestNote struct{ N int }

// inspectOnly hides every ability of a store but the core and the Inspector.
type inspectOnly struct {
	queue.Queue
	driver.Inspector
}

// groupStore is a store with group aggregation.
type groupStore interface {
	queue.Queue
	driver.Inspector
	driver.Grouper
}

// TestGroupsShown checks the group members on the pages, on memory and on
// Redis (skipped without MERIDIAN_REDIS_ADDR): the job list's grouped tab
// lists them with their key, a member's page names its group, a set's
// page the group it came from and its size; a store without group
// aggregation has no grouped tab and refuses the state.
func TestGroupsShown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) groupStore
	}{
		{"Memory", func(*testing.T) groupStore { return memqueue.New() }},
		{"Redis", func(t *testing.T) groupStore { return openRedisOne(t).(groupStore) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			groupsShown(t, tc.open(t))
		})
	}
}

// groupsShown is TestGroupsShown on one store.
func groupsShown(t *testing.T, q groupStore) {
	ctx := t.Context()
	var ids []string
	for n := range 3 {
		id, _, err := queue.Enqueue(ctx, q, digestNote{n}, queue.OnQueue("digests"), queue.Group("user-42"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	s := serve(t, dashboard.ForQueue(q))
	list := s.page("jobs?state=" + string(driver.StateGrouped) + "&queue=digests")
	if got := strings.Count(list.Body, ">group user-42<"); got != 3 {
		t.Errorf("grouped list shows the key %d times, want 3 (one per member)", got)
	}
	if !strings.Contains(list.Body, `state=grouped`) {
		t.Errorf("the job list has no grouped tab")
	}
	if got := text(find(s.page("jobs/"+ids[0]).Doc, byID("group"))); got != "user-42" {
		t.Errorf("member's page: group %q, want user-42", got)
	}
	rule, _ := driver.GroupRule{MaxSize: 3}.Normalize()
	if n, err := q.GatherGroups(ctx, []string{"digests"}, queue.NameOf[digestNote](), rule); err != nil || n != 1 {
		t.Fatalf("GatherGroups = %d, %v; want one set", n, err)
	}
	sets, err := q.Reserve(ctx, []string{"digests"}, 1, time.Minute)
	if err != nil || len(sets) != 1 {
		t.Fatalf("Reserve = %d, %v; want the set", len(sets), err)
	}
	got := strings.Join(strings.Fields(text(find(s.page("jobs/"+sets[0].ID).Doc, byID("group-set")))), " ")
	if got != "user-42, 3 members" {
		t.Errorf("set's page: %q, want %q", got, "user-42, 3 members")
	}

	bare := serve(t, dashboard.ForQueue(inspectOnly{q, q}))
	if r := bare.get(bare.url("jobs?state=grouped")); r.StatusCode != http.StatusBadRequest {
		t.Errorf("grouped list without Grouper: %d, want 400", r.StatusCode)
	}
	if strings.Contains(bare.page("jobs").Body, "state=grouped") {
		t.Errorf("a store without Grouper shows a grouped tab")
	}
}
