package browsertest_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// sendEmail is the registered job type of the job-action walk; the dead
// jobs of deadJobs carry its name.
type sendEmail struct {
	To string `json:"to"`
}

func (sendEmail) JobName() string { return "SendEmail" }

// The job actions' walk (issue 29 item 3): a failed job's payload edited
// (a payload that does not decode refused, the job unchanged), then
// retried; a scheduled job run now; a cancelled job run again beside its
// retention note; a job dispatched from the sidebar's Dispatch page.
// Each shows in the job page's Actions table with who acted.
func TestBrowserJobActions(t *testing.T) {
	ctx := browser(t)
	bg := context.Background()
	q := memqueue.New()
	dead := deadJobs(t, q, "emails", 1, `{"to":"a"}`, "smtp: mailbox unavailable")[0]
	sched, _ := queue.NewJob(sendEmail{To: "later"}, queue.OnQueue("emails"), queue.Delay(time.Hour))
	gone, _ := queue.NewJob(sendEmail{To: "gone"}, queue.OnQueue("emails"), queue.Delay(time.Hour))
	for _, j := range []queue.Job{sched, gone} {
		if err := q.Push(bg, j); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Cancel(bg, gone.ID); err != nil {
		t.Fatal(err)
	}
	s := serve(t, dashboard.ForQueue(q), dashboard.JobType[sendEmail](),
		dashboard.Identify(func(*http.Request) string { return "alice" }))

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return v
	}
	fill := func(sel, value string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`document.querySelector(` + strconv.Quote(sel) + `).value = ` + strconv.Quote(value))
	}
	payload := func(id string) string {
		t.Helper()
		j, err := q.GetJob(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		return string(j.Payload)
	}

	// A payload that does not decode into SendEmail: refused, unchanged.
	do("refused edit",
		chromedp.Navigate(s.url("jobs/"+dead)),
		chromedp.WaitVisible(chromedp.CSS(`#edit-payload`)),
		fill(`#edit-payload`, `{"to": 5}`),
		chromedp.Click(chromedp.CSS(`#edit-retry`)),
		chromedp.WaitVisible(chromedp.CSS(`#message`)),
	)
	if m := text(`#message`); !strings.Contains(m, "not a valid SendEmail") || payload(dead) != `{"to":"a"}` {
		t.Fatalf("a refused edit: the page says %q and the payload is %s", m, payload(dead))
	}
	do("edit and retry",
		chromedp.Navigate(s.url("jobs/"+dead)),
		chromedp.WaitVisible(chromedp.CSS(`#edit-payload`)),
		fill(`#edit-payload`, `{"to": "b"}`),
		chromedp.Click(chromedp.CSS(`#edit-retry`)),
		chromedp.WaitVisible(chromedp.CSS(`#actions`)),
	)
	if a := text(`#actions`); !strings.Contains(a, "alice") || !strings.Contains(a, "payload edited") || payload(dead) != `{"to": "b"}` {
		t.Errorf("after the edit the Actions table says %q and the payload is %s", a, payload(dead))
	}

	do("run now",
		chromedp.Navigate(s.url("jobs/"+sched.ID)),
		chromedp.Click(chromedp.CSS(`#run-now`)),
		chromedp.WaitVisible(chromedp.CSS(`#actions`)),
	)
	if a := text(`#actions`); !strings.Contains(a, "run now") {
		t.Errorf("after Run now the Actions table says %q", a)
	}
	if j, _ := q.GetJob(bg, sched.ID); j.State != queue.StateReady {
		t.Errorf("after Run now the job is %s, want ready", j.State)
	}

	do("run again",
		chromedp.Navigate(s.url("jobs/"+gone.ID)),
		chromedp.WaitVisible(chromedp.CSS(`#retention-note`)),
	)
	if n := text(`#retention-note`); !strings.Contains(n, "retention") {
		t.Errorf("the cancelled job's note says %q, want it to name retention", n)
	}
	do("run again", chromedp.Click(chromedp.CSS(`#run-again`)), chromedp.WaitVisible(chromedp.CSS(`#actions`)))
	if a := text(`#actions`); !strings.Contains(a, "retried (was cancelled)") {
		t.Errorf("after Run again the Actions table says %q", a)
	}

	do("dispatch",
		chromedp.Navigate(s.url("")),
		chromedp.Click(chromedp.CSS(`nav.sidebar a[href="./dispatch"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#dispatch-payload`)),
		fill(`#dispatch-queue`, "vip"),
		fill(`#dispatch-payload`, `{"to": "c"}`),
		chromedp.Click(chromedp.CSS(`#dispatch`)),
		chromedp.WaitVisible(chromedp.CSS(`#actions`)),
	)
	if a := text(`#actions`); !strings.Contains(a, "dispatched") || !strings.Contains(a, "alice") {
		t.Errorf("the dispatched job's Actions table says %q", a)
	}
	if n, err := q.Len(bg, "vip"); err != nil || n != 1 {
		t.Errorf("vip holds %d jobs (%v), want the one dispatched", n, err)
	}

	do("clone",
		chromedp.Navigate(s.url("jobs/"+sched.ID)),
		chromedp.WaitVisible(chromedp.CSS(`#clone-note`)),
		chromedp.Click(chromedp.CSS(`#clone`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)),
	)
	if a := text(`#actions`); !strings.Contains(a, "cloned from "+sched.ID) || !strings.Contains(a, "alice") {
		t.Errorf("the clone's Actions table says %q", a)
	}
	if o, _ := q.GetJob(bg, sched.ID); len(o.Actions) == 0 || !strings.HasPrefix(o.Actions[len(o.Actions)-1].What, "cloned as ") {
		t.Errorf("the original's history after Clone: %+v", o.Actions)
	}
}
