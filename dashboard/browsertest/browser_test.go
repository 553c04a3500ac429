package browsertest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite" // sqlite://
)

// browser starts headless Chromium for t. Without a browser the test is
// skipped locally and fails under CI=true.
//
// chromedp creates and owns the browser's user-data directory. The cleanup
// closes the browser and then waits, through the allocator's cancel, for
// the browser process to exit, for its leftover children (which go on
// writing there for a moment) to be killed and for the directory to be
// removed. A directory from t.TempDir would be removed by the testing
// package while a child still wrote into it, failing the test with
// "directory not empty".
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
		chromedp.Flag("disable-crash-reporter", true),
		chromedp.Flag("disable-breakpad", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		// Close the browser gracefully, bounded in time; then cancelAlloc
		// waits for the process to exit, the leftovers to be killed and
		// the user-data directory to be gone.
		closeCtx, cancelClose := context.WithTimeout(bctx, 10*time.Second)
		defer cancelClose()
		var proc *os.Process
		if c := chromedp.FromContext(bctx); c != nil && c.Browser != nil {
			proc = c.Browser.Process()
		}
		chromedp.Cancel(closeCtx) // an error here is a slow close; cancelAlloc still waits
		cancelCtx()
		cancelAlloc()
		if proc != nil {
			// The allocator has reaped the process: signalling it fails.
			if err := proc.Signal(syscall.Signal(0)); err == nil {
				t.Errorf("browser process %d still running after cleanup", proc.Pid)
			}
		}
	})
	return ctx
}

// site is a dashboard mounted under /admin/queues/ on a test server, as
// the cookbook mounts it.
type site struct{ srv *httptest.Server }

func serve(t *testing.T, src dashboard.Source, opts ...dashboard.Option) *site {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(src, opts...)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &site{srv: srv}
}

// url returns the absolute URL of a path under the dashboard root.
func (s *site) url(rel string) string { return s.srv.URL + "/admin/queues/" + rel }

// openSQLite opens a SQLite queue on a file of the test's own.
func openSQLite(t *testing.T) queue.Queue {
	t.Helper()
	q, err := queue.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, ok := q.(io.Closer); ok {
			c.Close()
		}
	})
	return q
}

// deadJobs pushes n jobs to qname of q and dead-letters them with reason.
func deadJobs(t *testing.T, q queue.Queue, qname string, n int, payload string, reason string, opts ...queue.Option) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for range n {
		j, err := queue.NewJob(struct{}{}, append([]queue.Option{queue.OnQueue(qname)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		j.Name = "SendEmail"
		j.Payload = []byte(payload)
		if err := q.Push(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for left := n; left > 0; {
		got, err := q.Reserve(ctx, []string{qname}, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		for _, j := range got {
			if err := testutil.Fail(ctx, q, j.Lease(), reason); err != nil {
				t.Fatal(err)
			}
			left--
		}
	}
	return ids
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
		testutil.Eventually(t, 15*time.Second, func() bool { return eval(js) }, "%s: never happened", what)
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

// contrastJS measures, for each selector, the contrast ratio (WCAG 2) of
// the first matching element's text against the background it is drawn
// on, blending translucent layers down to the page; -1 when nothing
// matches.
const contrastJS = `((sels) => {
  const parse = (c) => {
    const p = c.match(/rgba?\(([^)]+)\)/)[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (fg, bg) => [0, 1, 2].map((i) => fg[i] * fg[3] + bg[i] * (1 - fg[3])).concat([1]);
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let b = [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) b = over(layers[i], b);
    return b;
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const out = {};
  for (const sel of sels) {
    const el = document.querySelector(sel);
    if (!el) { out[sel] = -1; continue; }
    const bg = background(el);
    const a = lum(over(parse(getComputedStyle(el).color), bg)), b = lum(bg);
    out[sel] = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  }
  return out;
})(SELECTORS)`

// The polish a user sees: a skip link first in the tab order, text that
// keeps a 4.5:1 contrast in the light and the dark theme (the live dot,
// tab counts, tags, danger text and buttons, muted labels), the system's
// dark preference followed, and a theme toggle whose choice survives a
// reload.
func TestBrowserThemesContrastAndSkipLink(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	deadJobs(t, q, "emails", 3, `{}`, "smtp: 550", queue.Tags("vip"))
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(time.Hour))
	evalBool := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	navigate := func(rel, visible string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(s.url(rel)), chromedp.WaitVisible(chromedp.CSS(visible))); err != nil {
			t.Fatal(err)
		}
	}
	pages := []struct {
		rel, visible string
		selectors    []string
	}{
		{"", "#queues", []string{".live-dot", "td.bad", ".stat .label", ".sidebar .mode", "#theme-toggle"}},
		{"failed", "#jobs", []string{".tab.active .count", ".tab:not(.active)", ".tab:not(.active) .count", ".tag",
			".error-cell", "button.danger", "th"}},
	}
	checkContrast := func(theme string) {
		t.Helper()
		for _, p := range pages {
			navigate(p.rel, p.visible)
			sels := `["` + strings.Join(p.selectors, `","`) + `"]`
			got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](strings.Replace(contrastJS, "SELECTORS", sels, 1)))
			if err != nil {
				t.Fatal(err)
			}
			for _, sel := range p.selectors {
				switch r := got[sel]; {
				case r < 0:
					t.Errorf("%s theme, page %q: no element %s", theme, p.rel, sel)
				case r < 4.5:
					t.Errorf("%s theme, page %q: %s has contrast %.2f:1, want at least 4.5:1", theme, p.rel, sel, r)
				}
			}
		}
	}
	darkPage := `(() => { const c = getComputedStyle(document.documentElement).backgroundColor.match(/\d+/g).map(Number); return c[0] + c[1] + c[2] < 200; })()`

	// Light by default, and the skip link is the first stop of the keyboard.
	navigate("", "#queues")
	if evalBool(darkPage) {
		t.Error("the page is dark without a dark preference or choice")
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
		t.Fatal(err)
	}
	if !evalBool(`document.activeElement.matches("a.skip") && document.activeElement.getBoundingClientRect().top >= 0`) {
		t.Error("the first Tab does not land on a visible skip link")
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	if !evalBool(`location.hash === "#main" && document.activeElement === document.getElementById("main")`) {
		t.Error("the skip link does not move the focus to the main content")
	}
	checkContrast("light")

	// The system's dark preference is followed.
	_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	navigate("", "#queues")
	if !evalBool(darkPage) {
		t.Error("the page is light under prefers-color-scheme: dark")
	}
	checkContrast("dark")

	// The toggle overrides the preference, and the choice survives a reload.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#theme-toggle"))); err != nil {
		t.Fatal(err)
	}
	if evalBool(darkPage) || !evalBool(`document.getElementById("theme-toggle").getAttribute("aria-pressed") === "false"`) {
		t.Error("the toggle did not switch a dark page to light")
	}
	navigate("failed", "#jobs")
	if evalBool(darkPage) {
		t.Error("the light choice did not survive navigation")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#theme-toggle"))); err != nil {
		t.Fatal(err)
	}
	navigate("", "#queues")
	if !evalBool(darkPage) {
		t.Error("the dark choice did not survive navigation")
	}
}
