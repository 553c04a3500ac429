package browsertest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The Workers page's fleet controls: from the sidebar, Pause all behind
// its confirm dialog (the workers shown paused, the store's fleet paused),
// Continue all, one worker paused and continued from its row, then
// Terminate all behind its dialog (the store counts one termination).
func TestBrowserWorkersFleet(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	q := memqueue.New()
	for _, id := range []string{"w1", "w2"} {
		if err := q.Heartbeat(bg, driver.WorkerInfo{ID: id, Host: "web-" + id, PID: 7, Queues: []string{"default"}, Concurrency: 4, StartedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
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
	orders := func(id string) driver.WorkerOrders {
		t.Helper()
		o, err := q.WorkerOrders(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	flash := func() string {
		f, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.flash`)))
		return f
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.url("failed")),
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./workers"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#fleet-pause`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	confirmed()
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#fleet-pause`)),
		chromedp.WaitVisible(chromedp.CSS(`#fleet-continue`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-worker="w1"] td[data-state="paused"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	asked("Pause every worker?")
	if !orders("w1").Paused || !strings.Contains(flash(), "Paused") {
		t.Errorf("after Pause all the store's orders are %+v and the page says %q", orders("w1"), flash())
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#fleet-continue`)),
		chromedp.WaitVisible(chromedp.CSS(`#fleet-pause`)),
		chromedp.Click(chromedp.CSS(`tr[data-worker="w2"] button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-worker="w2"] button[data-action="continue"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if orders("w1").Paused || !orders("w2").Paused {
		t.Errorf("after Continue all and w2's Pause: w1 %+v, w2 %+v", orders("w1"), orders("w2"))
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr[data-worker="w2"] button[data-action="continue"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-worker="w2"] button[data-action="pause"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	confirmed()
	err = chromedp.Do(ctx,
		// The last action's flash goes first, so the one waited for is
		// the terminate's.
		chromedp.Evaluate[chromedp.Void](`document.querySelector("p.flash")?.remove()`),
		chromedp.Click(chromedp.CSS(`#fleet-terminate`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	asked("Terminate every worker?")
	if o := orders("w2"); o.Paused || o.Terminations != 1 || !strings.Contains(flash(), "terminate") {
		t.Errorf("after Terminate all the store's orders are %+v and the page says %q", o, flash())
	}
}
