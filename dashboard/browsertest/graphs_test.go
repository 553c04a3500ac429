package browsertest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dag"
	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type reportStep struct{ Name string }

// The Graphs walk: from the sidebar to the list, to the graph, drawn as
// boxes left to right by depth with a line per dependency and each box
// coloured by its node's state; its failed node is retried (the box turns
// pending, its cancelled dependant waits again) and the graph is then
// cancelled, each behind its confirm dialog.
func TestBrowserGraphs(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	q := memqueue.New()
	job := func(n string) queue.Job {
		j, _ := queue.NewJob(reportStep{n}, queue.OnQueue("report")) // a struct: it encodes
		return j
	}
	g := dag.New("monthly report").
		Add("fetch", job("fetch")).
		Add("sales", job("sales"), dag.After("fetch")).
		Add("costs", job("costs"), dag.After("fetch")).
		Add("pdf", job("pdf"), dag.After("sales", "costs"))
	id, err := dag.Dispatch(bg, q, g)
	if err != nil {
		t.Fatal(err)
	}
	finish := func(o driver.Outcome) string {
		t.Helper()
		got, err := q.Reserve(bg, []string{"report"}, 1, time.Minute)
		if err != nil || len(got) != 1 {
			t.Fatalf("Reserve = %d, %v", len(got), err)
		}
		if err := testutil.Complete(bg, q, driver.Completion{Lease: got[0].Lease(), Outcome: o, Reason: "no data", Graph: id}); err != nil {
			t.Fatal(err)
		}
		_, node := dag.Of(&got[0])
		return node
	}
	finish(driver.OutcomeDone)             // fetch
	failed := finish(driver.OutcomeFailed) // sales or costs; pdf is cancelled
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(200*time.Millisecond))

	check := func(what, js string) {
		t.Helper()
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil || !ok {
			t.Errorf("%s: %v, %v", what, ok, err)
		}
	}
	text := func(sel string) (s string) {
		t.Helper()
		s, _ = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		return s
	}
	confirmed := func() {
		check("answering the next confirm dialog", `window.confirm = m => (sessionStorage.setItem("asked", m), true), true`)
	}
	asked := func(want string) {
		check("the dialog asked "+want, `(sessionStorage.getItem("asked") || "").includes(`+"`"+want+"`"+`)`)
	}
	box := func(node string) string {
		return `document.querySelector('g.node[data-node="` + node + `"] rect').getBoundingClientRect()`
	}
	row := `tr[data-graph="` + id + `"]`
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.url("")),
		chromedp.WaitVisible(chromedp.CSS(`#queues`)),
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./graphs"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Click(chromedp.CSS(row+` a.graph-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#graph-drawing`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	check("four boxes, laid out left to right by depth, the two middle ones one above the other",
		`(() => { const f = `+box("fetch")+`, s = `+box("sales")+`, c = `+box("costs")+`, p = `+box("pdf")+`;
		  return f.width > 50 && f.height > 10 && f.right < s.left && Math.abs(s.left - c.left) < 1 && Math.abs(s.top - c.top) > s.height / 2 && s.right < p.left })()`)
	check("four dependency lines, each from a box's right edge to another's left",
		`document.querySelectorAll('#graph-drawing line.edge').length === 4`)
	check("the failed box is drawn in another colour than the done one",
		`getComputedStyle(document.querySelector('g.node[data-node="`+failed+`"] rect')).fill !== getComputedStyle(document.querySelector('g.node[data-node="fetch"] rect')).fill`)
	check("the cancelled node is marked so", `document.querySelector('g.node[data-node="pdf"]').dataset.state === "cancelled"`)

	confirmed()
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#retry-graph`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	asked("Retry this graph's 1 failed node")
	check("after the retry the failed node is pending and pdf waits again",
		`document.querySelector('g.node[data-node="`+failed+`"]').dataset.state === "pending" && document.querySelector('g.node[data-node="pdf"]').dataset.state === "waiting"`)

	confirmed()
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#cancel-graph`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#cancel-graph`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	asked("Cancel this graph?")
	if st := strings.TrimSpace(text(`#graph-status`)); !strings.EqualFold(st, "cancelled") {
		t.Errorf("after the cancel the graph shows %q", st)
	}
}
