package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type importRow struct{ N int }

// dispatchRows dispatches a batch of n importRow members named name.
func dispatchRows(t *testing.T, q queue.Queue, name string, n int, allowFailures bool) string {
	t.Helper()
	b := queue.Batch{Name: name, AllowFailures: allowFailures}
	for i := range n {
		j, err := queue.NewJob(importRow{i}, queue.OnQueue("import"))
		if err != nil {
			t.Fatal(err)
		}
		b.Jobs = append(b.Jobs, j)
	}
	id, err := queue.DispatchBatch(context.Background(), q, b)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func rowsOf(doc *html.Node, key string) []string {
	var out []string
	for _, n := range findAll(doc, func(n *html.Node) bool { return n.Data == "tr" && hasAttr(n, key) }) {
		out = append(out, attr(n, key))
	}
	return out
}

// TestBatchesPages walks the Batches page and a batch's page over
// memqueue: the list newest first with progress bars, the members by
// state a page at a time, retrying the failed members and cancelling the
// batch through their forms.
func TestBatchesPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	big := dispatchRows(t, q, "big import", 60, true)
	jobs, err := q.Reserve(ctx, []string{"import"}, 2, time.Minute)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Reserve = %d, %v", len(jobs), err)
	}
	if err := testutil.Complete(ctx, q, driver.Completion{Lease: jobs[0].Lease(), Outcome: driver.OutcomeFailed, Reason: "bad row", Batch: big}); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Complete(ctx, q, driver.Completion{Lease: jobs[1].Lease(), Outcome: driver.OutcomeDone, Batch: big}); err != nil {
		t.Fatal(err)
	}
	small := dispatchRows(t, q, "small import", 2, false)
	s := serve(t, dashboard.ForQueue(q))

	list := s.page("batches")
	if got := rowsOf(list.Doc, "data-batch"); len(got) != 2 || got[0] != small || got[1] != big {
		t.Fatalf("the batches page lists %v, want [%s %s] (newest first)", got, small, big)
	}
	if find(list.Doc, func(n *html.Node) bool {
		return n.Data == "a" && strings.HasSuffix(attr(n, "href"), "batches") && strings.Contains(attr(n, "class"), "active")
	}) == nil {
		t.Errorf("the sidebar has no active Batches entry:\n%s", list.Body)
	}
	if bars := findAll(list.Doc, func(n *html.Node) bool { return n.Data == "svg" && strings.Contains(attr(n, "class"), "batch-bar") }); len(bars) != 2 {
		t.Errorf("%d progress bars, want one per batch", len(bars))
	}

	detail := s.page("batches/" + big)
	if got := len(rowsOf(detail.Doc, "data-member")); got != dashboard.PageSize {
		t.Errorf("the batch page lists %d members, want a page of %d", got, dashboard.PageSize)
	}
	next := find(detail.Doc, byID("next-page"))
	if next == nil {
		t.Fatalf("a batch of 60 members has no next page link")
	}
	rest := s.get(resolve(t, s.url("batches/"+big), attr(next, "href")))
	if got := len(rowsOf(rest.Doc, "data-member")); got != 60-dashboard.PageSize {
		t.Errorf("the second page lists %d members, want %d", got, 60-dashboard.PageSize)
	}
	failed := s.page("batches/" + big + "?state=failed")
	if got := rowsOf(failed.Doc, "data-member"); len(got) != 1 || got[0] != jobs[0].ID {
		t.Errorf("the failed tab lists %v, want the failed member %s", got, jobs[0].ID)
	}

	// Retry the failed member: it is ready again.
	retry := formWithAction(detail.Doc, "/retry")
	if retry == nil {
		t.Fatalf("a batch with a failed member offers no retry:\n%s", detail.Body)
	}
	after := s.follow(s.submit(s.url("batches/"+big), retry, nil, nil))
	if !strings.Contains(flashOf(after.Doc), "Retried 1 job") {
		t.Errorf("after retry the page says %q", flashOf(after.Doc))
	}
	if info, err := q.GetJob(ctx, jobs[0].ID); err != nil || info.State != queue.StateReady {
		t.Errorf("the retried member is %v, %v; want ready", info.State, err)
	}

	// Cancel the batch: its 58 members not yet finished are cancelled.
	cancel := formWithAction(after.Doc, "/cancel")
	if cancel == nil {
		t.Fatalf("a running batch offers no cancel:\n%s", after.Body)
	}
	done := s.follow(s.submit(s.url("batches/"+big), cancel, nil, nil))
	if !strings.Contains(flashOf(done.Doc), "Cancelled 58 job") {
		t.Errorf("after cancel the page says %q", flashOf(done.Doc))
	}
	if st := text(find(done.Doc, byID("batch-status"))); st != "cancelled" {
		t.Errorf("after cancel the batch shows status %q", st)
	}
	if formWithAction(done.Doc, "/cancel") != nil {
		t.Errorf("a cancelled batch still offers cancel")
	}
	if n, err := q.Len(ctx, "import"); err != nil || n != 3 {
		t.Errorf("after the cancel %d jobs wait, %v; want 3 (the retried member and the small batch)", n, err)
	}
	if r := s.get(s.url("batches/nope")); r.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown batch: %d, want 404", r.StatusCode)
	}
}

// TestBatchesAPI reads and acts on batches through api/batches.
func TestBatchesAPI(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	id := dispatchRows(t, q, "api import", 3, false)
	s := serve(t, dashboard.ForQueue(q))

	var list struct {
		Batches []struct {
			ID       string `json:"id"`
			Total    int    `json:"total"`
			Pending  int    `json:"pending"`
			Progress int    `json:"progress"`
		} `json:"batches"`
	}
	r := s.get(s.url("api/batches"))
	if err := json.Unmarshal([]byte(r.Body), &list); err != nil || len(list.Batches) != 1 || list.Batches[0].ID != id || list.Batches[0].Pending != 3 {
		t.Fatalf("api/batches = %s, %v", r.Body, err)
	}
	var one struct {
		ID      string `json:"id"`
		Members []struct {
			JobID string `json:"job_id"`
			State string `json:"state"`
		} `json:"members"`
	}
	r = s.get(s.url("api/batches/" + id + "?state=pending"))
	if err := json.Unmarshal([]byte(r.Body), &one); err != nil || len(one.Members) != 3 || one.Members[0].State != "pending" {
		t.Fatalf("api/batches/{id}?state=pending = %s, %v", r.Body, err)
	}
	if r := s.get(s.url("api/batches/" + id + "?state=sleeping")); r.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown member state: %d, want 400", r.StatusCode)
	}
	if r := s.get(s.url("api/batches/nope")); r.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown batch: %d, want 404", r.StatusCode)
	}

	// A POST needs the double-submit token: from the cookie a page set.
	post := func(path string, token bool) response {
		req, _ := http.NewRequest(http.MethodPost, s.url(path), nil)
		req.Header.Set("Origin", s.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if token {
			for _, c := range s.c.Jar.Cookies(req.URL) {
				if c.Name == "meridian_csrf" {
					req.Header.Set("X-Csrf-Token", c.Value)
				}
			}
		}
		return s.do(req)
	}
	s.page("batches") // sets the token cookie
	if r := post("api/batches/"+id+"/cancel", false); r.StatusCode != http.StatusForbidden {
		t.Errorf("a cancel without the token: %d, want 403", r.StatusCode)
	}
	r = post("api/batches/"+id+"/cancel", true)
	var cancelled struct {
		Cancelled  int       `json:"cancelled"`
		FinishedAt time.Time `json:"finished_at"`
	}
	if err := json.Unmarshal([]byte(r.Body), &cancelled); err != nil || cancelled.Cancelled != 3 || cancelled.FinishedAt.IsZero() {
		t.Fatalf("api cancel = %d %s, %v; want 3 cancelled and finished", r.StatusCode, r.Body, err)
	}
	r = post("api/batches/"+id+"/retry", true)
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `"retried": 0`) {
		t.Errorf("api retry of a batch without failures = %d %s", r.StatusCode, r.Body)
	}
}

// TestBatchesNeedABatcher checks that a Source without batches offers no
// Batches page.
func TestBatchesNeedABatcher(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.NewInspector(dashboard.NewStats(), nil))
	if r := s.get(s.url("batches")); r.StatusCode != http.StatusNotFound {
		t.Errorf("the batches page without batches: %d, want 404", r.StatusCode)
	}
	if r := s.get(s.url("api/batches")); r.StatusCode != http.StatusNotFound {
		t.Errorf("api/batches without batches: %d, want 404", r.StatusCode)
	}
	if p := s.page(""); find(p.Doc, func(n *html.Node) bool { return n.Data == "a" && strings.HasSuffix(attr(n, "href"), "batches") }) != nil {
		t.Errorf("the sidebar offers Batches without batches")
	}
}
