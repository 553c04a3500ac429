package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// sendEmail is the registered job type of the job-action tests; the
// dead jobs of deadJobs carry its name.
type sendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
}

func (sendEmail) JobName() string { return "SendEmail" }

// actionStores are the stores the job-action tests run on: memory, and
// SQLite keeping finished jobs for an hour.
var actionStores = []struct {
	name string
	open func(*testing.T) queue.Queue
}{
	{"memqueue", func(*testing.T) queue.Queue { return memqueue.New() }},
	{"sqlite", func(t *testing.T) queue.Queue {
		q, err := queue.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "jobs.db")+"?retention=1h")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.(io.Closer).Close() })
		return q
	}},
}

// deadNamed pushes a job named name to qname of q and dead-letters it.
func deadNamed(t *testing.T, q queue.Queue, qname, name, payload string) string {
	t.Helper()
	ctx := context.Background()
	j, _ := queue.NewJob(struct{}{}, queue.OnQueue(qname))
	j.Name, j.Payload = name, []byte(payload)
	if err := q.Push(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := q.Reserve(ctx, []string{qname}, 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("reserve: %v, %d jobs", err, len(got))
	}
	if err := testutil.Fail(ctx, q, got[0].Lease(), "boom"); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// apiJobOf reads job id through the API.
func (s *site) apiJobOf(id string) map[string]any {
	s.t.Helper()
	code, m := s.apiCall(http.MethodGet, "jobs/"+id, actToken, nil)
	if code != 200 {
		s.t.Fatalf("GET api/jobs/%s: %d %v", id, code, m)
	}
	return m
}

// actionsOf returns the "by: what" of each action of an API job.
func actionsOf(j map[string]any) []string {
	var out []string
	as, _ := j["actions"].([]any)
	for _, a := range as {
		m, _ := a.(map[string]any)
		out = append(out, m["by"].(string)+": "+m["what"].(string))
	}
	return out
}

// payloadOf returns an API job's payload as compact JSON text.
func payloadOf(j map[string]any) string {
	b, _ := json.Marshal(j["payload"])
	return string(b)
}

// Each job action of issue 29 item 3 through the API: a payload edit
// checked against the registered type (a bad one a 422 that changes
// nothing), run now, a dispatch, each recorded in the job's history with
// who acted.
func TestAPIJobAmendActions(t *testing.T) {
	t.Parallel()
	for _, st := range actionStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			q := st.open(t)
			s := serve(t, dashboard.ForQueue(q), dashboard.BearerTokens(tokens), dashboard.JobType[sendEmail]())
			dead := deadJobs(t, q, "emails", 2, `{"to":"a"}`, "smtp down")

			// A payload its type refuses: 422, and the job is as it was.
			for _, bad := range []any{
				map[string]any{"payload": map[string]any{"to": "b", "subjct": "typo"}},
				map[string]any{"payload": "not an object"},
				`{"payload": {"to": "b"}, "extra": 1}`,
			} {
				code, m := s.apiCall(http.MethodPost, "jobs/"+dead[0]+"/retry", actToken, bad)
				if code != http.StatusUnprocessableEntity && code != http.StatusBadRequest {
					t.Fatalf("retry with %v: %d %v, want 422 (or 400 for a body the endpoint does not take)", bad, code, m)
				}
			}
			j := s.apiJobOf(dead[0])
			if jobState(map[string]any{"job": j}) != "dead" || payloadOf(j) != `{"to":"a"}` || len(actionsOf(j)) != 0 {
				t.Fatalf("after refused edits: state %v, payload %s, actions %v; want dead, unchanged, none", j["state"], payloadOf(j), actionsOf(j))
			}
			code, m := s.apiCall(http.MethodPost, "jobs/"+dead[0]+"/retry", actToken, map[string]any{"payload": map[string]any{"to": "b", "subjct": "typo"}})
			if e, _ := m["error"].(string); code != 422 || !strings.Contains(e, "subjct") {
				t.Errorf("a misspelt field: %d %q, want 422 naming it", code, e)
			}

			// The edit that decodes: stored, retried, recorded.
			code, m = s.apiCall(http.MethodPost, "jobs/"+dead[0]+"/retry", actToken, map[string]any{"payload": map[string]any{"to": "b"}})
			if code != 200 || m["changed"] != true || m["was"] != "dead" || jobState(m) != "ready" {
				t.Fatalf("retry with an edited payload: %d %v", code, m)
			}
			j = s.apiJobOf(dead[0])
			if payloadOf(j) != `{"to":"b"}` {
				t.Errorf("payload after the edit = %s, want {\"to\":\"b\"}", payloadOf(j))
			}
			if got := actionsOf(j); len(got) != 1 || !strings.HasPrefix(got[0], "deploy-bot: retried (was dead) with its payload edited") {
				t.Errorf("actions after the edit = %q, want one by deploy-bot saying the payload was edited", got)
			}

			// A job whose type is not registered can be retried, not edited.
			other := deadNamed(t, q, "other", "Other", `{"x":1}`)
			code, m = s.apiCall(http.MethodPost, "jobs/"+other+"/retry", actToken, map[string]any{"payload": map[string]any{"x": 2}})
			if e, _ := m["error"].(string); code != 422 || !strings.Contains(e, "not registered") {
				t.Errorf("editing an unregistered type: %d %q, want 422 saying it is not registered", code, e)
			}

			// Run now.
			sched, _ := queue.NewJob(sendEmail{To: "later"}, queue.OnQueue("emails"), queue.Delay(time.Hour))
			if err := q.Push(context.Background(), sched); err != nil {
				t.Fatal(err)
			}
			code, m = s.apiCall(http.MethodPost, "jobs/"+sched.ID+"/run-now", actToken, nil)
			if code != 200 || m["changed"] != true || m["was"] != "scheduled" || jobState(m) != "ready" {
				t.Fatalf("run now: %d %v", code, m)
			}
			if got := actionsOf(s.apiJobOf(sched.ID)); len(got) != 1 || !strings.HasPrefix(got[0], "deploy-bot: run now (was due ") {
				t.Errorf("actions after run now = %q", got)
			}
			if code, m = s.apiCall(http.MethodPost, "jobs/"+sched.ID+"/run-now", actToken, nil); code != 200 || m["changed"] != false {
				t.Errorf("run now again: %d %v, want 200 unchanged", code, m)
			}
			if code, m = s.apiCall(http.MethodPost, "jobs/"+dead[1]+"/run-now", actToken, nil); code != 409 || jobState(m) != "dead" {
				t.Errorf("run now of a failed job: %d %v, want 409 with the job", code, m)
			}

			// Dispatch.
			code, m = s.apiCall(http.MethodGet, "job-types", actToken, nil)
			if types, _ := m["types"].([]any); code != 200 || len(types) != 1 || types[0] != "SendEmail" {
				t.Errorf("job-types: %d %v, want [SendEmail]", code, m)
			}
			for _, bad := range []struct {
				body any
				code int
			}{
				{map[string]any{"name": "SendEmail", "payload": map[string]any{"to": "c", "cc": "d"}}, 422},
				{map[string]any{"name": "Nope", "payload": map[string]any{}}, 422},
				{map[string]any{"payload": map[string]any{}}, 400},
			} {
				if code, m := s.apiCall(http.MethodPost, "jobs", actToken, bad.body); code != bad.code {
					t.Errorf("dispatch %v: %d %v, want %d", bad.body, code, m, bad.code)
				}
			}
			if n, err := q.Len(context.Background(), "vip"); err != nil || n != 0 {
				t.Fatalf("refused dispatches stored %d jobs in vip (%v)", n, err)
			}
			code, m = s.apiCall(http.MethodPost, "jobs", actToken, map[string]any{"name": "SendEmail", "queue": "vip", "payload": map[string]any{"to": "c"}})
			id, _ := m["id"].(string)
			if code != 201 || id == "" || jobState(m) != "ready" {
				t.Fatalf("dispatch: %d %v", code, m)
			}
			j = s.apiJobOf(id)
			if j["queue"] != "vip" || j["name"] != "SendEmail" || payloadOf(j) != `{"to":"c"}` {
				t.Errorf("dispatched job: queue %v, name %v, payload %s", j["queue"], j["name"], payloadOf(j))
			}
			if got := actionsOf(j); len(got) != 1 || got[0] != "deploy-bot: dispatched from the dashboard" {
				t.Errorf("dispatched job's actions = %q", got)
			}

			// Clone: a copy under a new ID, ready, both histories naming
			// the other; the original as it was.
			code, m = s.apiCall(http.MethodPost, "jobs/"+dead[1]+"/clone", actToken, nil)
			cid, _ := m["id"].(string)
			if code != 201 || cid == "" || cid == dead[1] || m["clone_of"] != dead[1] || jobState(m) != "ready" {
				t.Fatalf("clone of a failed job: %d %v, want 201 with a new ready job", code, m)
			}
			c, orig := s.apiJobOf(cid), s.apiJobOf(dead[1])
			if c["queue"] != "emails" || c["name"] != orig["name"] || payloadOf(c) != payloadOf(orig) || jobState(map[string]any{"job": orig}) != "dead" {
				t.Errorf("clone: queue %v, name %v, payload %s; original %v %s", c["queue"], c["name"], payloadOf(c), orig["state"], payloadOf(orig))
			}
			if got := actionsOf(c); len(got) != 1 || got[0] != "deploy-bot: cloned from "+dead[1]+" on the dashboard" {
				t.Errorf("clone's actions = %q", got)
			}
			if got := actionsOf(orig); len(got) != 1 || got[0] != "deploy-bot: cloned as "+cid {
				t.Errorf("original's actions after the clone = %q", got)
			}
			if code, m = s.apiCall(http.MethodPost, "jobs/no-such-job/clone", actToken, nil); code != 404 {
				t.Errorf("clone of an unknown job: %d %v, want 404", code, m)
			}
			// A unique job whose key its active original holds: 409, nothing stored.
			uj, _ := queue.NewJob(sendEmail{To: "u"}, queue.OnQueue("uniq"), queue.Unique("only-one"))
			if err := q.Push(context.Background(), uj); err != nil {
				t.Fatal(err)
			}
			if code, m = s.apiCall(http.MethodPost, "jobs/"+uj.ID+"/clone", actToken, nil); code != 409 {
				t.Errorf("clone of an active unique job: %d %v, want 409", code, m)
			}
			if n, err := q.Len(context.Background(), "uniq"); err != nil || n != 1 {
				t.Errorf("after a refused clone the queue holds %d jobs (%v), want 1", n, err)
			}
			if code, _ := s.apiCall(http.MethodPost, "jobs/"+dead[1]+"/clone", readToken, nil); code != 403 {
				t.Errorf("clone with a read-only token: %d, want 403", code)
			}

			// Reading is not acting.
			if code, _ := s.apiCall(http.MethodPost, "jobs/"+dead[1]+"/retry", readToken, nil); code != 403 {
				t.Errorf("retry with a read-only token: %d, want 403", code)
			}
		})
	}
}

// The job page's actions: edit and retry (a bad payload says why and
// changes nothing), run now, run a cancelled job again with the note that
// it needs retention, and the Dispatch page; the history table shows who
// acted.
func TestPageJobAmendActions(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	s := serve(t, dashboard.ForQueue(q), dashboard.JobType[sendEmail](),
		dashboard.Identify(func(*http.Request) string { return "alice" }))
	dead := deadJobs(t, q, "emails", 1, `{"to":"a"}`, "smtp down")[0]

	page := s.page("jobs/" + dead)
	form := find(page.Doc, byID("edit-form"))
	if form == nil || !strings.Contains(text(find(page.Doc, byID("edit-payload"))), `{"to":"a"}`) {
		t.Fatalf("the failed job's page has no edit form holding its payload:\n%s", page.Body)
	}
	r := s.submit(s.url("jobs/"+dead), form, nil, url.Values{"payload": {`{"to": 5}`}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(text(find(r.Doc, byID("message"))), "not a valid SendEmail") {
		t.Fatalf("a payload that does not decode: %d\n%s", r.StatusCode, r.Body)
	}
	if j := s.page("jobs/" + dead); find(j.Doc, byID("actions")) != nil || !strings.Contains(j.Body, "smtp down") {
		t.Fatal("a refused edit changed the job")
	}
	r = s.follow(s.submit(s.url("jobs/"+dead), form, nil, url.Values{"payload": {`{"to": "b"}`}}))
	acts := find(r.Doc, byID("actions"))
	if acts == nil || !strings.Contains(text(acts), "alice") || !strings.Contains(text(acts), "payload edited") {
		t.Fatalf("after the edit the job page shows no action by alice:\n%s", r.Body)
	}
	if !strings.Contains(text(find(r.Doc, byID("payload"))), `"b"`) {
		t.Errorf("the page shows the old payload after the edit")
	}

	// Run now, then cancel and run again.
	sched, _ := queue.NewJob(sendEmail{To: "later"}, queue.OnQueue("emails"), queue.Delay(time.Hour))
	if err := q.Push(context.Background(), sched); err != nil {
		t.Fatal(err)
	}
	page = s.page("jobs/" + sched.ID)
	run := find(page.Doc, byID("run-now"))
	if run == nil {
		t.Fatalf("a scheduled job's page has no Run now button:\n%s", page.Body)
	}
	r = s.follow(s.submit(s.url("jobs/"+sched.ID), formWithAction(page.Doc, "/run-now"), nil, nil))
	if !strings.Contains(text(find(r.Doc, byID("actions"))), "run now") || find(r.Doc, byID("run-now")) != nil {
		t.Fatalf("after Run now: no action recorded, or the button is still offered:\n%s", r.Body)
	}
	if _, err := q.Cancel(context.Background(), sched.ID); err != nil {
		t.Fatal(err)
	}
	page = s.page("jobs/" + sched.ID)
	if find(page.Doc, byID("run-again")) == nil || !strings.Contains(text(find(page.Doc, byID("retention-note"))), "retention") {
		t.Fatalf("a cancelled job's page offers no Run again with the retention note:\n%s", page.Body)
	}
	r = s.follow(s.submit(s.url("jobs/"+sched.ID), formWithAction(page.Doc, "/retry"), nil, nil))
	if !strings.Contains(text(find(r.Doc, byID("actions"))), "retried (was cancelled)") {
		t.Fatalf("after Run again: no action recorded:\n%s", r.Body)
	}

	// Clone: the button on any job's page leads to the clone's page.
	page = s.page("jobs/" + sched.ID)
	if find(page.Doc, byID("clone")) == nil || !strings.Contains(text(find(page.Doc, byID("clone-note"))), "retention") {
		t.Fatalf("a job's page offers no Clone with its note on retention:\n%s", page.Body)
	}
	r = s.follow(s.submit(s.url("jobs/"+sched.ID), formWithAction(page.Doc, "/clone"), nil, nil))
	if !strings.Contains(text(find(r.Doc, byID("actions"))), "alice") || !strings.Contains(text(find(r.Doc, byID("actions"))), "cloned from "+sched.ID) {
		t.Fatalf("after Clone the page is not the clone's, with alice's note:\n%s", r.Body)
	}

	// Dispatch: a refused payload shows the form again with the reason.
	page = s.page("dispatch")
	form = find(page.Doc, byID("dispatch-form"))
	if form == nil {
		t.Fatalf("the Dispatch page has no form:\n%s", page.Body)
	}
	r = s.submit(s.url("dispatch"), form, nil, url.Values{"name": {"SendEmail"}, "queue": {"vip"}, "payload": {`{"too": 1}`}})
	if r.StatusCode != 422 || find(r.Doc, byID("dispatch-error")) == nil || !strings.Contains(text(find(r.Doc, byID("dispatch-payload"))), "too") {
		t.Fatalf("a refused dispatch: %d, want 422 with the reason and the payload kept:\n%s", r.StatusCode, r.Body)
	}
	r = s.follow(s.submit(s.url("dispatch"), form, nil, url.Values{"name": {"SendEmail"}, "queue": {"vip"}, "payload": {`{"to": "c"}`}}))
	if !strings.Contains(text(find(r.Doc, byID("actions"))), "alice") || !strings.Contains(r.Body, "vip") {
		t.Fatalf("the dispatched job's page does not show it in vip, dispatched by alice:\n%s", r.Body)
	}
}

// Without JobType the Dispatch page says how to register types, and a
// job page offers no payload edit but says why.
func TestDispatchWithoutTypes(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	s := serve(t, dashboard.ForQueue(q))
	if p := s.page("dispatch"); find(p.Doc, byID("no-types")) == nil {
		t.Errorf("the Dispatch page without types does not say how to register them:\n%s", p.Body)
	}
	dead := deadJobs(t, q, "emails", 1, `{"to":"a"}`, "boom")[0]
	p := s.page("jobs/" + dead)
	if find(p.Doc, byID("edit-form")) != nil || find(p.Doc, byID("edit-note")) == nil {
		t.Errorf("a job of an unregistered type: an edit form, or no note saying why there is none:\n%s", p.Body)
	}
}
