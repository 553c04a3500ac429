package browsertest_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// rowActionsJS reports, for every row-action button of the list, whether
// a click at its centre reaches it: it is inside the viewport after
// scrolling the page vertically only (no sideways scrolling of the page or
// of the table), and nothing, such as a clipping table wrapper, hides it.
// It returns the failures as text.
const rowActionsJS = `(() => {
  const bad = [];
  const btns = [...document.querySelectorAll("td.row-actions button")];
  if (btns.length === 0) return ["no row-action buttons"];
  for (const b of btns) {
    // Scroll the page vertically only: a button reachable only by
    // scrolling a table sideways is not visible.
    const r0 = b.getBoundingClientRect();
    window.scrollTo(0, window.scrollY + r0.top - window.innerHeight / 2);
    const r = b.getBoundingClientRect();
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    if (r.width === 0 || r.height === 0) { bad.push(b.textContent + ": no size"); continue; }
    if (r.left < 0 || r.right > window.innerWidth) { bad.push(b.textContent + ": outside the viewport (" + Math.round(r.left) + "-" + Math.round(r.right) + " of " + window.innerWidth + ")"); continue; }
    if (window.scrollX !== 0) { bad.push(b.textContent + ": the page scrolled sideways to show it"); window.scrollTo(0, window.scrollY); continue; }
    const hit = document.elementFromPoint(x, y);
    if (!hit || !b.contains(hit)) bad.push(b.textContent + ": covered by " + (hit ? hit.tagName + "." + hit.className : "nothing"));
  }
  return bad;
})()`

// Row actions are reachable on a laptop (1,400 px) and a phone (400 px)
// even when a job has tags and a long error, without scrolling sideways.
func TestBrowserRowActionsVisible(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	long := "smtp: 550 5.1.1 <someone-with-a-long-address@example.com>: Recipient address rejected: User unknown in virtual mailbox table " + strings.Repeat("x", 200)
	deadJobs(t, q, "emails-with-a-rather-long-queue-name", 3, `{"to":"someone"}`, long, queue.Tags("vip", "newsletter", "eu-west"))
	if err := q.Push(t.Context(), queue.Job{Queue: "emails", Name: "SendEmail"}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(time.Hour))
	for _, w := range []int64{1400, 400} {
		for _, rel := range []string{"failed", "jobs?state=ready"} {
			err := chromedp.Do(ctx,
				chromedp.EmulateViewport(w, 900),
				chromedp.Navigate(s.url(rel)),
				chromedp.WaitVisible(chromedp.CSS(`#jobs`)),
			)
			if err != nil {
				t.Fatal(err)
			}
			bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](rowActionsJS))
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) > 0 {
				t.Errorf("%d px, %s: row actions not reachable: %s", w, rel, strings.Join(bad, "; "))
			}
		}
	}
}

// burstSource serves a Source's pages with made-up chart points.
type burstSource struct {
	dashboard.Source
	pts []driver.MetricPoint
}

func (b burstSource) Metrics(context.Context, time.Time) ([]driver.MetricPoint, error) {
	return b.pts, nil
}

// The throughput chart keeps a quiet hour readable next to a burst: the
// ordinary minutes keep most of the chart's height, the burst is drawn
// clipped and its value is said.
func TestBrowserChartBurstDoesNotFlatten(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	if err := q.Push(t.Context(), queue.Job{Queue: "emails", Name: "SendEmail"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Minute)
	var pts []driver.MetricPoint
	for i := range 60 {
		p := driver.MetricPoint{Queue: "emails", Minute: now.Add(-time.Duration(i) * time.Minute), Processed: 90,
			TotalRuntime: 90 * 20 * time.Millisecond, MaxRuntime: 40 * time.Millisecond}
		if i == 5 {
			p.Processed, p.MaxRuntime = 40000, 90*time.Second
		}
		pts = append(pts, p)
	}
	s := serve(t, burstSource{dashboard.ForQueue(q), pts}, dashboard.RefreshInterval(time.Hour))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(s.url("")), chromedp.WaitVisible(chromedp.CSS(`.chart svg`))); err != nil {
		t.Fatal(err)
	}
	type geo struct {
		SVG, Lowest float64
		Clipped     int
		Note        string
	}
	g, err := chromedp.Run(ctx, chromedp.Evaluate[geo](`(() => {
  const fig = document.querySelector(".chart");
  const svg = fig.querySelector("svg").getBoundingClientRect().height;
  const bars = [...fig.querySelectorAll("rect.ok:not(.clipped)")].map(r => r.getBoundingClientRect().height);
  const note = fig.querySelector(".clipped-note");
  return {SVG: svg, Lowest: Math.min(...bars), Clipped: fig.querySelectorAll("rect.clipped").length, Note: note ? note.innerText : ""};
})()`))
	if err != nil {
		t.Fatal(err)
	}
	if g.Lowest < g.SVG/3 {
		t.Errorf("ordinary minutes drawn %.0f px high in a %.0f px chart: the burst flattened them", g.Lowest, g.SVG)
	}
	if g.Clipped != 1 || !strings.Contains(g.Note, "40,000/min") {
		t.Errorf("burst: %d clipped bars, note %q; want 1 and a note naming 40,000/min", g.Clipped, g.Note)
	}
}

// bareNumberJS returns the visible texts of the page that hold a number of
// four digits or more without thousands separators ("4983.7", "409863"),
// leaving out job IDs and other monospaced values.
const bareNumberJS = `(() => {
  const out = [];
  const walk = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
  for (let n; (n = walk.nextNode()); ) {
    if (n.parentElement.closest(".mono, code, pre, script, style, input, textarea")) continue;
    if (/(^|[^\d,.:\-])\d{4,}/.test(n.textContent)) out.push(n.textContent.trim());
  }
  return out;
})()`

// bigFigures serves a Source's pages with production-sized figures: rates
// and counts in the thousands and beyond.
type bigFigures struct{ dashboard.Source }

func (b bigFigures) Figures(ctx context.Context) (dashboard.StatsView, error) {
	sv, err := b.Source.Figures(ctx)
	if err != nil {
		return sv, err
	}
	big := func(qs *dashboard.QueueStats) {
		qs.JobsPerMinute = 409863.4
		qs.Processed, qs.Failed = 24591804, 4983
		qs.Dead = driver.Count{N: 10000, More: true}
		qs.Throughput = 4983.7
		qs.AvgRuntime, qs.MaxRuntime, qs.AvgWait = 4983*time.Second, 100000*time.Second, 1234567*time.Millisecond
	}
	for i := range sv.Queues {
		big(&sv.Queues[i])
	}
	big(&sv.Totals)
	return sv, nil
}

// Every figure the pages show groups its thousands: counts, rates and
// durations alike, on the overview, a queue page and the lists.
func TestBrowserThousandsSeparators(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	bg := context.Background()
	jobs := make([]queue.Job, 12345)
	for i := range jobs {
		jobs[i] = queue.Job{Queue: "emails", Name: "SendEmail"}
	}
	for i := range jobs {
		if err := q.Push(bg, jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Run a few thousand so the rates and processed counts pass 1,000.
	for range 30 {
		got, err := q.Reserve(bg, []string{"emails"}, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range got {
			if err := testutil.Ack(bg, q, j.Lease()); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadJobs(t, q, "bounces", 2, `{}`, "boom")
	s := serve(t, bigFigures{dashboard.ForQueue(q)}, dashboard.RefreshInterval(time.Hour))
	for _, p := range []struct{ rel, visible string }{
		{"", "#queues"}, {"queue/emails", "main"}, {"jobs?state=ready", "#jobs"}, {"failed", "#jobs"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(s.url(p.rel)), chromedp.WaitVisible(chromedp.CSS(p.visible))); err != nil {
			t.Fatal(err)
		}
		bare, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](bareNumberJS))
		if err != nil {
			t.Fatal(err)
		}
		if len(bare) > 0 {
			t.Errorf("page %q shows numbers without thousands separators: %q", p.rel, bare)
		}
	}
	// The overview does show the big count, grouped.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url("")), chromedp.WaitVisible(chromedp.CSS("#queues"))); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"9,345", "409,863.4", "24,591,804"} {
		if !strings.Contains(text, want) {
			t.Errorf("the overview does not show %s grouped:\n%s", want, text)
		}
	}
}

// Times on the job page show in the reader's time zone, with the UTC time
// kept in the title.
func TestBrowserLocalTimes(t *testing.T) {
	ctx := browser(t)
	q := memqueue.New()
	id := deadJobs(t, q, "emails", 1, `{}`, "boom")[0]
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(time.Hour))
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url("jobs/"+id)), chromedp.WaitVisible(chromedp.CSS("#job-fields time"))); err != nil {
		t.Fatal(err)
	}
	type tm struct{ Text, Title string }
	got, err := chromedp.Run(ctx, chromedp.Evaluate[tm](`(() => { const t = document.querySelector("#job-fields time"); return {Text: t.textContent, Title: t.title}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Text, "GMT+9") || !strings.HasSuffix(got.Title, "UTC") {
		t.Errorf("job time shows %q (title %q), want Tokyo time (GMT+9) and UTC in the title", got.Text, got.Title)
	}
	// The page's "read at" is a time of day, in Tokyo time too.
	got, err = chromedp.Run(ctx, chromedp.Evaluate[tm](`(() => { const t = document.querySelector("#read-at time"); return {Text: t.textContent, Title: t.title}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	year := strconv.Itoa(time.Now().Year())
	if !strings.Contains(got.Text, "GMT+9") || strings.Contains(got.Text, year) || strings.Count(got.Text, ":") != 2 || !strings.HasSuffix(got.Title, "UTC") {
		t.Errorf("read-at shows %q (title %q), want the time of day in Tokyo (GMT+9) and UTC in the title", got.Text, got.Title)
	}
}
