package browsertest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// shipOrder derives its tags from its fields (queue.Tagger).
type shipOrder struct{ Order, Customer int }

func (s shipOrder) Tags() []string { return []string{fmt.Sprintf("customer:%d", s.Customer)} }

// The Tags walk: from the sidebar to the Tags page, a tag monitored with
// its form, then a worker runs the customer's jobs: the tag's page shows
// them as the live refresh reads them, the failed one with its error on
// the Failed tab, and a job of another customer not at all.
// The worker starts after the tag is monitored: it records from its first
// job.
func TestBrowserMonitoredTags(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(200*time.Millisecond))
	check := func(what, js string) {
		t.Helper()
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil || !ok {
			t.Errorf("%s: %v, %v", what, ok, err)
		}
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.url("failed")),
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./tags"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#no-tags`)),
		chromedp.SendKeys(chromedp.CSS(`#monitor-tag-name`), "customer:42"),
		chromedp.Click(chromedp.CSS(`button[data-monitor]`)),
		chromedp.WaitVisible(chromedp.CSS(`#no-tag-jobs`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	check("the tag's page names it", `document.querySelector("#tag-name").textContent === "customer:42"`)

	var ids []string
	for _, o := range []shipOrder{{1, 42}, {2, 42}, {3, 7}} {
		id, _, err := queue.Enqueue(context.Background(), q, o)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler)).MaxRetry(1)
	queue.Handle(w, func(_ context.Context, s shipOrder) error {
		if s.Order == 2 {
			return errors.New("carrier down")
		}
		return nil
	})
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	err = chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+ids[0]+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+ids[1]+`"]`)),
	)
	if err != nil {
		t.Fatalf("the customer's jobs did not appear on the tag's page: %v", err)
	}
	check("another customer's job is not listed", `!document.querySelector('tr[data-id="`+ids[2]+`"]')`)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[data-list="failed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+ids[1]+`"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	check("the Failed tab lists the failed job alone, with its error",
		`document.querySelectorAll("#tag-jobs tbody tr").length === 1 && document.querySelector("#tag-jobs td.error").textContent.includes("carrier down")`)
}
