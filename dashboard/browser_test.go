package dashboard_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// browser starts headless Chromium for t. Without a browser the test is
// skipped locally and fails under CI=true.
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		msg := "no Chromium found (on Debian: apt-get install -y chromium)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

// The walk: open the overview, open a failed job, retry it, see it
// leave the failed list; over the memory driver and over SQLite, as the
// demo runs.
func TestBrowserRetryAFailedJob(t *testing.T) {
	t.Run("memory", func(t *testing.T) { browserRetry(t, memqueue.New()) })
	t.Run("sqlite", func(t *testing.T) { browserRetry(t, openSQLite(t)) })
}

func browserRetry(t *testing.T, q queue.Queue) {
	ctx := browser(t)
	ids := deadJobs(t, q, "emails", 2, `{"UserID":42}`, "smtp: mailbox unavailable")
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(200*time.Millisecond))

	// run runs steps, then reads a value, failing the test on error.
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	eval := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	run(chromedp.Navigate(s.url("")), chromedp.WaitVisible(chromedp.CSS(`#queues`)))
	failedCount := text(`[data-stat="failed"]`)
	run(
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./failed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#jobs`)),
		chromedp.Click(chromedp.CSS(`tr[data-id="`+ids[0]+`"] a.job-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#payload`)),
	)
	payload := text(`#payload`)
	run(chromedp.Click(chromedp.CSS(`#retry`)), chromedp.WaitVisible(chromedp.CSS(`#jobs`)))
	path, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname`))
	if err != nil {
		t.Fatal(err)
	}
	gone := eval(`document.querySelector('tr[data-id="` + ids[0] + `"]') === null`)
	if strings.TrimSpace(failedCount) != "2" {
		t.Errorf("overview shows %q failed, want 2", failedCount)
	}
	if !strings.Contains(payload, `"UserID": 42`) {
		t.Errorf("job page payload = %q, want pretty JSON", payload)
	}
	if path != "/admin/queues/failed" {
		t.Errorf("after retry the browser is at %s, want /admin/queues/failed", path)
	}
	if !gone {
		t.Error("the retried job is still in the failed list")
	}

	// Live refresh: a job that fails while the page is open appears
	// without a reload.
	more := deadJobs(t, q, "emails", 1, `{}`, "late failure")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+more[0]+`"]`))); err != nil {
		t.Fatalf("the live region did not show the new failure: %v", err)
	}
	if !eval(`document.querySelector('tr[data-id="` + ids[1] + `"]') !== null`) {
		t.Error("the refresh dropped the other failed job")
	}
}

// The live refresh leaves a region alone while the user has ticked boxes in
// it, and the ticked jobs can then be retried together.
func TestBrowserBulkRetryKeepsTheSelection(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	ids := deadJobs(t, q, "emails", 3, `{}`, "boom")
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(100*time.Millisecond))
	eval := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	box := func(id string) string { return `input[type=checkbox][value="` + id + `"]` }
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.url("failed")),
		chromedp.WaitVisible(chromedp.CSS(`#jobs`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	// Tick the boxes from inside the page: with a 100ms refresh the region
	// may be swapped between finding a node and clicking it from outside,
	// which is the very race the guard closes only once a box is ticked.
	for _, id := range []string{ids[0], ids[2]} {
		if !eval(`(() => { const b = document.querySelector('` + box(id) + `'); b.click(); return b.checked })()`) {
			t.Fatalf("could not tick the box of job %s", id)
		}
	}
	// A new failure while boxes are ticked (and nothing has the focus) does
	// not replace the table.
	eval(`document.activeElement.blur(), true`)
	late := deadJobs(t, q, "emails", 1, `{}`, "late")
	if err := chromedp.Do(ctx, chromedp.Sleep(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if eval(`document.querySelector('tr[data-id="`+late[0]+`"]') !== null`) || !eval(`document.querySelector('`+box(ids[0])+`').checked`) {
		t.Fatal("the refresh replaced a region holding the user's selection")
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#retry-selected`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+late[0]+`"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		present := eval(`document.querySelector('tr[data-id="` + id + `"]') !== null`)
		if present != (i == 1) {
			t.Errorf("job %d present after retrying jobs 0 and 2: %v", i, present)
		}
	}
}

// Live refresh updates the page in place: changed figures show without a
// reload, and the elements that did not change are the same nodes as
// before (nothing is torn down and rebuilt, so nothing flickers). A queue
// paused elsewhere shows as paused, with Resume, without a reload.
func TestBrowserLiveRefreshUpdatesInPlace(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	bg := context.Background()
	if err := q.Push(bg, queue.Job{Queue: "emails", Name: "Mail"}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(100*time.Millisecond))
	eval := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// waitJS polls js until it is true; the figures are shared between
	// requests for two seconds, so a change takes that long to show.
	waitJS := func(what, js string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !eval(js) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never happened", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url("")), chromedp.WaitVisible(chromedp.CSS(`#queues`))); err != nil {
		t.Fatal(err)
	}
	// Mark nodes with JavaScript properties, which a rebuilt node would
	// not have.
	eval(`document.querySelector('#queues').kept = true; document.querySelector('[data-stat="pending"]').kept = true; true`)
	for range 2 {
		if err := q.Push(bg, queue.Job{Queue: "emails", Name: "Mail"}); err != nil {
			t.Fatal(err)
		}
	}
	waitJS("the ready count going to 3", `document.querySelector('[data-stat="pending"]').textContent.trim() === "3"`)
	if !eval(`document.querySelector('#queues').kept === true && document.querySelector('[data-stat="pending"]').kept === true`) {
		t.Error("the refresh rebuilt nodes instead of updating them in place")
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(s.url("queue/emails")), chromedp.WaitVisible(chromedp.CSS(`#pause`))); err != nil {
		t.Fatal(err)
	}
	if err := q.Pause(bg, "emails"); err != nil {
		t.Fatal(err)
	}
	waitJS("the queue showing as paused", `!!document.querySelector('#paused-note') && !!document.querySelector('#resume') && !document.querySelector('#pause')`)

	// A job forgotten while its page is open: the page says it is gone.
	dead := deadJobs(t, q, "audio", 1, `{}`, "boom") // emails is paused
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url("jobs/"+dead[0])), chromedp.WaitVisible(chromedp.CSS(`#payload`))); err != nil {
		t.Fatal(err)
	}
	if err := q.ForgetDead(bg, dead[0]); err != nil {
		t.Fatal(err)
	}
	waitJS("the job page saying the job is gone", `(document.querySelector("#message") || {textContent: ""}).textContent.includes("no job")`)
}
