package browsertest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type nightlyReport struct{ Day int }

// The Periodic walk: from the sidebar to the page, a schedule paused behind
// its confirm dialog (shown paused, in the store too), run now while paused
// (one job in its queue), then resumed.
func TestBrowserPeriodic(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	q := memqueue.New()
	j, err := queue.NewJob(nightlyReport{1}, queue.OnQueue("reports"))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := driver.EncodePeriodicTemplate(j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.RegisterPeriodic(bg, driver.PeriodicInfo{Name: "nightly", Schedule: "every 24h", NextTick: time.Now().Add(time.Hour), Template: tpl}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(200*time.Millisecond))
	check := func(what, js string) {
		t.Helper()
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil || !ok {
			t.Errorf("%s: %v, %v", what, ok, err)
		}
	}
	confirmed := func() {
		check("answering the next confirm dialog", `window.confirm = m => (sessionStorage.setItem("asked", m), true), true`)
	}
	asked := func(want string) {
		check("the dialog asked "+want, `(sessionStorage.getItem("asked") || "").includes(`+"`"+want+"`"+`)`)
	}
	flash := func() string {
		t.Helper()
		f, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.flash`)))
		return f
	}
	paused := func() bool {
		t.Helper()
		recs, err := q.Periodics(bg)
		if err != nil || len(recs) != 1 {
			t.Fatalf("Periodics = %+v, %v", recs, err)
		}
		return recs[0].Paused
	}
	row := `tr[data-periodic="nightly"]`
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.url("failed")),
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./periodic"]`)),
		chromedp.WaitVisible(chromedp.CSS(row+` button[data-pause]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	confirmed()
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(row+` button[data-pause]`)),
		chromedp.WaitVisible(chromedp.CSS(row+` [data-paused]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	asked("Pause nightly?")
	if f := flash(); !strings.Contains(f, "paused") || !paused() {
		t.Errorf("after Pause the page says %q and the store's record is paused %v", f, paused())
	}
	confirmed()
	err = chromedp.Do(ctx,
		// The pause's flash goes first, so the one waited for is the run's.
		chromedp.Evaluate[chromedp.Void](`document.querySelector("p.flash")?.remove()`),
		chromedp.Click(chromedp.CSS(row+` button[data-run]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	asked("Run nightly now?")
	if n, err := q.Len(bg, "reports"); err != nil || n != 1 || !strings.Contains(flash(), "run now") {
		t.Errorf("after Run now queue reports holds %d (%v) and the page says %q", n, err, flash())
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(row+` button[data-resume]`)),
		chromedp.WaitVisible(chromedp.CSS(row+` button[data-pause]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if paused() {
		t.Error("after Resume the store's record is still paused")
	}
}
