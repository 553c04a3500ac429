package browsertest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type importRow struct{ N int }

// The Batches walk: from the sidebar to the list, whose progress bar shows
// the done and failed parts, to the batch, whose failed member is retried
// and which is then cancelled, each behind its confirm dialog.
func TestBrowserBatches(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	q := memqueue.New()
	b := queue.Batch{Name: "nightly import", AllowFailures: true}
	for _, r := range []importRow{{1}, {2}, {3}, {4}} {
		j, _ := queue.NewJob(r, queue.OnQueue("import")) // a struct: it encodes
		b.Jobs = append(b.Jobs, j)
	}
	id, err := queue.DispatchBatch(bg, q, b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.Reserve(bg, []string{"import"}, 2, time.Minute)
	if err != nil || len(got) != 2 {
		t.Fatalf("Reserve = %d, %v", len(got), err)
	}
	for i, o := range []driver.Outcome{driver.OutcomeFailed, driver.OutcomeDone} { // one row fails, one imports
		if err := testutil.Complete(bg, q, driver.Completion{Lease: got[i].Lease(), Outcome: o, Reason: "bad row", Batch: id}); err != nil {
			t.Fatal(err)
		}
	}
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(200*time.Millisecond))

	// check runs a script that must return true, failing with what it
	// checks when it does not; text reads an element's text.
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
	// confirmed answers the page's next confirm dialog yes and keeps its
	// question in sessionStorage, which outlives the form's navigation.
	confirmed := func() {
		check("answering the next confirm dialog", `window.confirm = m => (sessionStorage.setItem("asked", m), true), true`)
	}
	asked := func(want string) {
		check("the dialog asked "+want, `(sessionStorage.getItem("asked") || "").includes(`+"`"+want+"`"+`)`)
	}
	row := `tr[data-batch="` + id + `"]`
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.url("")),
		chromedp.WaitVisible(chromedp.CSS(`#queues`)),
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./batches"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	if err != nil {
		t.Fatal(err)
	}
	// A quarter done and a quarter failed, drawn side by side.
	check("the progress bar shows a quarter done and a quarter failed, side by side",
		`(() => { const r = document.querySelector('`+row+`'); const d = r.querySelector('.bar-done').getBoundingClientRect(), f = r.querySelector('.bar-failed').getBoundingClientRect(), g = r.querySelector('.bar-ground').getBoundingClientRect(); return d.width > 0 && Math.abs(d.width - g.width / 4) < 2 && Math.abs(f.left - d.right) < 1 && Math.abs(f.width - d.width) < 1 })()`)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(row+` a.batch-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#members`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	confirmed()
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#retry-failed`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if f := text(`p.flash`); !strings.Contains(f, "Retried 1 job") {
		t.Errorf("after retrying the failed members the page says %q", f)
	}
	asked("Retry this batch's 1 failed member")
	if info, err := q.GetJob(bg, got[0].ID); err != nil || info.State != queue.StateReady {
		t.Errorf("the retried member is %v, %v; want ready", info.State, err)
	}
	confirmed()
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#cancel-batch`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#cancel-batch`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if st := strings.TrimSpace(text(`#batch-status`)); !strings.EqualFold(st, "cancelled") {
		t.Errorf("after the cancel the batch shows %q", st)
	}
	if f := text(`p.flash`); !strings.Contains(f, "Cancelled 2 job") {
		t.Errorf("after the cancel the page says %q", f)
	}
	asked("Cancel this batch?")
}
