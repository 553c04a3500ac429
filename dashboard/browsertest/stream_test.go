package browsertest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// windowed serves a payload search in two windows, as a store without a
// search index does when its first call stops at its row bound: the first
// call answers the first match and a cursor, and the call that goes on
// from it waits for release, then answers the rest.
type windowed struct {
	dashboard.Source
	release chan struct{}
	once    sync.Once
}

func (s *windowed) open() { s.once.Do(func() { close(s.release) }) }

func (s *windowed) List(ctx context.Context, q dashboard.ListQuery) (dashboard.JobList, error) {
	if q.Search == "" {
		return s.Source.List(ctx, q)
	}
	after := q.After
	q.After = ""
	l, err := s.Source.List(ctx, q)
	if err != nil || len(l.Jobs) < 2 {
		return l, err
	}
	if after == "" {
		return dashboard.JobList{Jobs: l.Jobs[:1], Next: "window-2", Scanned: 10}, nil
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return dashboard.JobList{}, ctx.Err()
	}
	return dashboard.JobList{Jobs: l.Jobs[1:]}, nil
}

// TestBrowserSearchStreams: a search page shows its first match while
// the search goes on (the page is still loading), and its Forget button
// asks before it deletes even then, before the deferred app.js has run;
// the rest of the matches come when the search goes on.
func TestBrowserSearchStreams(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	older := deadJobs(t, q, "emails", 1, `{"to":"needle-ann"}`, "boom")[0]
	newer := deadJobs(t, q, "emails", 1, `{"to":"needle-bob"}`, "boom")[0]
	src := &windowed{Source: dashboard.ForQueue(q), release: make(chan struct{})}
	t.Cleanup(src.open)
	s := serve(t, src)

	// Navigate without waiting for the page to load: it loads only once
	// the search has gone on.
	start := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.Navigate, page.NavigateParams{URL: s.url("failed?q=needle")})
		return err
	})
	if err := chromedp.Do(ctx, start); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('tr[data-id="`+newer+`"] button.forget') !== null`)); err != nil {
		t.Fatalf("the first match is not on the page while the search goes on: %v", err)
	}
	eval := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if !eval(`document.readyState === "loading"`) || eval(`document.querySelector('tr[data-id="`+older+`"]') !== null`) {
		t.Fatal("the page finished, or holds the second window's match, before the search went on")
	}
	// Forget asks first: the prompt is declined, so nothing is sent.
	if !eval(`(function () {
		window.asked = "";
		window.confirm = function (m) { window.asked = m; return false; };
		document.querySelector('tr[data-id="` + newer + `"] button.forget').click();
		return window.asked.indexOf("Forget this job") === 0;
	})()`) {
		t.Error("Forget on a row of a page still loading did not ask first")
	}

	src.open()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete" && document.querySelector('tr[data-id="`+older+`"]') !== null`)); err != nil {
		t.Fatalf("the second window's match did not come: %v", err)
	}
	if eval(`document.querySelector('#search-stopped, #no-jobs') !== null`) {
		t.Error("a search that found two matches says it stopped or found none")
	}
	if l, err := src.Source.List(context.Background(), dashboard.ListQuery{State: queue.StateDead}); err != nil || len(l.Jobs) != 2 {
		t.Errorf("failed jobs after the declined Forget: %d, %v; want 2", len(l.Jobs), err)
	}
}
