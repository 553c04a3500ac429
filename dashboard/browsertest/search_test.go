package browsertest_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
)

// TestBrowserFieldSearch: a field filter typed in the failed page's
// search box lists the jobs whose JSON field matches and no other; one
// that does not parse shows where and what was expected.
func TestBrowserFieldSearch(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	ann := deadJobs(t, q, "emails", 1, `{"user_id":42,"to":"ann"}`, "boom")[0]
	bob := deadJobs(t, q, "emails", 1, `{"user_id":7,"to":"bob"}`, "boom")[0]
	s := serve(t, dashboard.ForQueue(q))
	// search types text in the search box and sends the form, then
	// waits for the answer: until ready is on the page.
	search := func(text string, ready chromedp.Action[chromedp.Void]) {
		t.Helper()
		err := chromedp.Do(ctx,
			chromedp.Navigate(s.url("failed")),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+bob+`"]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), text),
			chromedp.Submit(chromedp.CSS(`input[name="q"]`)),
			ready,
		)
		if err != nil {
			t.Fatal(err)
		}
	}
	has := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	search(`payload.user_id = 42 AND "ann"`, chromedp.WaitNotPresent(chromedp.CSS(`tr[data-id="`+bob+`"]`)))
	if !has(`document.querySelector('tr[data-id="` + ann + `"]') !== null`) {
		t.Errorf("searching payload.user_id = 42 does not list %s", ann)
	}
	search(`payload.user_id = forty`, chromedp.WaitVisible(chromedp.CSS(`#message`)))
	if !has(`document.querySelector('#message').textContent.includes('bad search: at position 19: expected a value')`) {
		t.Error("a filter that does not parse does not say where")
	}
}
