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

type ledgerChange struct{ Cents int }

// The Sequences walk: a sequence held by its dead head is listed on the
// Sequences page (reached from the sidebar), its dead job's page names
// the sequence, and Release, behind its confirm dialog, lets the next
// member run: the page then says the sequence was released and lists
// none. The key holds a slash, quotes and markup, shown as text.
func TestBrowserReleaseSequence(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	q := memqueue.New()
	const key = `tenant/7 "vip" <b>`
	var ids []string
	for _, c := range []int{-500, 120} {
		id, _, err := queue.Enqueue(bg, q, ledgerChange{c}, queue.OnQueue("ledger"), queue.Sequence(key))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	got, err := q.Reserve(bg, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("Reserve = %d, %v; want the head alone", len(got), err)
	}
	c := driver.Completion{Lease: got[0].Lease(), Outcome: driver.OutcomeFailed, Reason: "ledger: account locked"}
	c.Sequence, c.ReleaseOnDead = driver.SequenceOf(got[0])
	if err := testutil.Complete(bg, q, c); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(200*time.Millisecond))

	check := func(what, js string) {
		t.Helper()
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil || !ok {
			t.Errorf("%s: %v, %v", what, ok, err)
		}
	}
	row := `tr[data-id="` + ids[0] + `"]`
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.url("failed")),
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./sequences"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	if err != nil {
		t.Fatal(err)
	}
	check("the key is shown as its text", `document.querySelector('`+row+` .seq-key').textContent === `+"`"+key+"`"+` && !document.querySelector("#sequences b")`)
	check("one member waits", `document.querySelector('`+row+` td.num').textContent.trim() === "1"`)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(row+` a.job-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#sequence`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	check("the dead job's page names its sequence", `document.querySelector("#sequence").textContent === `+"`"+key+"`")
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#sequences-link`)),
		chromedp.WaitVisible(chromedp.CSS(row+` button[data-release]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	check("answering the confirm dialog", `window.confirm = m => (sessionStorage.setItem("asked", m), true), true`)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(row+` button[data-release]`)),
		chromedp.WaitVisible(chromedp.CSS(`#no-held-sequences`)),
	)
	if err != nil {
		t.Fatalf("after Release the sequence is still listed: %v", err)
	}
	if flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.flash`))); err != nil || !strings.Contains(flash, "Sequence released") {
		t.Errorf("after Release the page says %q (%v)", flash, err)
	}
	check("the dialog named the key", `(sessionStorage.getItem("asked") || "").includes(`+"`"+key+"`"+`)`)
	if info, err := q.GetJob(bg, ids[1]); err != nil || info.State != queue.StateReady {
		t.Errorf("the next member is %v, %v; want ready", info.State, err)
	}
	if info, err := q.GetJob(bg, ids[0]); err != nil || info.State != queue.StateDead {
		t.Errorf("the released head is %v, %v; want still dead", info.State, err)
	}
}
