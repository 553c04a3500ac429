package browsertest_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The Metrics walk: from the sidebar to the page (last hour: the queue and
// job class that ran now, with their charts), to the 7-day view (the run of
// two days ago too), and a class that runs while the page is open appears
// with the live refresh.
func TestBrowserMetrics(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	now := time.Now()
	for _, r := range []driver.RunRecord{
		{Queue: "mail", Name: "SendEmail", Start: now, Runtime: 10 * time.Millisecond, Outcome: driver.OutcomeDone},
		{Queue: "mail", Name: "SendEmail", Start: now, Runtime: 30 * time.Millisecond, Outcome: driver.OutcomeFailed},
		{Queue: "reports", Name: "Digest", Start: now.Add(-48 * time.Hour), Runtime: 2 * time.Second, Outcome: driver.OutcomeDone},
	} {
		q.ObserveRun(r)
	}
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(200*time.Millisecond))
	check := func(what, js string) {
		t.Helper()
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil || !ok {
			t.Errorf("%s: %v, %v", what, ok, err)
		}
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.url("failed")),
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./metrics"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-series="SendEmail"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	check("the last hour shows queue mail with 1 processed and 1 failed",
		`(r => r && r.querySelector("[data-stat=processed]").textContent.trim() === "1" && r.querySelector("[data-stat=failed]").textContent.trim() === "1")(document.querySelector("#by-queue ~ table tr[data-series=mail]"))`)
	check("the last hour leaves out the run of two days ago", `!document.querySelector('tr[data-series="Digest"]')`)
	check("each series has its throughput and runtime charts", `document.querySelectorAll("#live svg").length === 4`)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[data-window="7d"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-series="Digest"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	check("the 7-day tab is the current one", `document.querySelector('a[data-window="7d"]').getAttribute("aria-current") === "page"`)
	check("the 7-day view shows queue reports", `!!document.querySelector('#by-queue ~ table tr[data-series="reports"]')`)
	q.ObserveRun(driver.RunRecord{Queue: "mail", Name: "Late", Start: time.Now(), Runtime: time.Millisecond, Outcome: driver.OutcomeDone})
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-series="Late"]`))); err != nil {
		t.Fatalf("a job class that ran while the page was open did not appear: %v", err)
	}
}
