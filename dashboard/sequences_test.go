package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// sequenceStores are the stores the held-sequence tests run on: memory,
// SQLite, and the servers' stores when their variables are set.
var sequenceStores = []struct {
	name string
	open func(*testing.T) queue.Queue
}{
	{"memqueue", func(*testing.T) queue.Queue { return memqueue.New() }},
	{"sqlite", openSQLite},
	{"postgres", func(t *testing.T) queue.Queue { q, _ := openPostgres(t); return q }},
	{"mysql", openMySQL},
	{"redis", openRedisOne},
}

// heldSequence pushes n members of the sequence key to qname of q and
// dead-letters the first, which then holds the others. It returns the
// members' IDs in push order.
func heldSequence(t *testing.T, q queue.Queue, qname, key string, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range n {
		j, err := queue.NewJob(struct{ N int }{i}, queue.OnQueue(qname), queue.Sequence(key))
		if err != nil {
			t.Fatal(err)
		}
		j.Name = "ApplyChange"
		if err := q.Push(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	got, err := q.Reserve(ctx, []string{qname}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != ids[0] {
		t.Fatalf("reserved %d jobs of the sequence, want only its head %s", len(got), ids[0])
	}
	c := driver.Completion{Lease: got[0].Lease(), Outcome: driver.OutcomeFailed, Reason: "ledger: account locked"}
	c.Sequence, c.ReleaseOnDead = driver.SequenceOf(got[0])
	if err := testutil.Complete(ctx, q, c); err != nil {
		t.Fatal(err)
	}
	return ids
}

// stateOf reads job id's state through q's Inspector.
func stateOf(t *testing.T, q queue.Queue, id string) driver.JobState {
	t.Helper()
	j, err := driver.CapabilitiesOf(q).Inspector.GetJob(context.Background(), id)
	if err != nil {
		t.Fatalf("GetJob(%s): %v", id, err)
	}
	return j.State
}

// TestHeldSequences lists a sequence held by its dead head on the
// Sequences page (and a queue's, from its page), releases it with the
// page's button, after which the next member is ready and the dead job's
// history says who released it; then the same through the API, with a
// key holding slashes. A second release finds nothing held.
func TestHeldSequences(t *testing.T) {
	t.Parallel()
	for _, st := range sequenceStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			q := st.open(t)
			s := serve(t, dashboard.ForQueue(q), dashboard.BearerTokens(tokens))
			const key = "account:42"
			ids := heldSequence(t, q, "ledger", key, 3)

			p := s.page("")
			if find(p.Doc, func(n *html.Node) bool { return n.Data == "a" && attr(n, "href") == "./sequences" }) == nil {
				t.Fatalf("the sidebar has no Sequences link:\n%s", p.Body)
			}
			if all := s.page("sequences"); find(all.Doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-key") == key }) == nil {
				t.Fatalf("the Sequences page does not list %s:\n%s", key, all.Body)
			}
			qp := s.page("queue/ledger")
			link := find(qp.Doc, byID("queue-sequences"))
			if link == nil {
				t.Fatalf("the queue page has no link to its held sequences:\n%s", qp.Body)
			}
			p = s.get(resolve(t, s.url("queue/ledger"), attr(link, "href")))
			row := find(p.Doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-key") == key })
			if p.StatusCode != 200 || row == nil {
				t.Fatalf("the queue's held sequences (%d) do not list %s:\n%s", p.StatusCode, key, p.Body)
			}
			if attr(row, "data-id") != ids[0] || attr(row, "data-queue") != "ledger" {
				t.Errorf("the row names job %s of %s, want the dead head %s of ledger", attr(row, "data-id"), attr(row, "data-queue"), ids[0])
			}
			cells := findAll(row, byTag("td"))
			if got := text(cells[5]); got != "2" {
				t.Errorf("waiting = %q, want 2", got)
			}
			if !strings.Contains(text(row), "ledger: account locked") {
				t.Errorf("the row does not show the dead job's error: %s", text(row))
			}
			jl := find(row, func(n *html.Node) bool { return n.Data == "a" && strings.Contains(attr(n, "class"), "job-link") })
			if jl == nil {
				t.Fatalf("the row does not link the dead job")
			}
			jp := s.get(resolve(t, p.Request.URL.String(), attr(jl, "href")))
			if jp.StatusCode != 200 || text(find(jp.Doc, byID("sequence"))) != key {
				t.Errorf("the dead job's page (%d) does not name its sequence:\n%s", jp.StatusCode, jp.Body)
			}

			// Release with the page's button.
			f := find(row, byTag("form"))
			after := s.follow(s.submit(p.Request.URL.String(), f, find(f, byTag("button")), nil))
			if !strings.Contains(flashOf(after.Doc), "Sequence released") {
				t.Errorf("after Release the page says %q", flashOf(after.Doc))
			}
			if find(after.Doc, byID("no-held-sequences")) == nil {
				t.Errorf("the released sequence is still listed:\n%s", after.Body)
			}
			if got := stateOf(t, q, ids[1]); got != driver.StateReady {
				t.Errorf("the next member is %s after the release, want ready", got)
			}
			if got := stateOf(t, q, ids[2]); got != driver.StateSequenced {
				t.Errorf("the last member is %s after the release, want sequenced", got)
			}
			head, err := driver.CapabilitiesOf(q).Inspector.GetJob(context.Background(), ids[0])
			if err != nil {
				t.Fatal(err)
			}
			if head.State != driver.StateDead || len(head.Actions) == 0 ||
				!strings.Contains(head.Actions[len(head.Actions)-1].What, `released its sequence "account:42"`) ||
				head.Actions[len(head.Actions)-1].By != "local" {
				t.Errorf("the dead job after the release: %s, actions %+v; want dead with the release recorded by local", head.State, head.Actions)
			}

			// The same through the API, with a key that holds slashes.
			const slashed = "tenant/7/account/9"
			ids = heldSequence(t, q, "billing", slashed, 2)
			code, out := s.apiCall(http.MethodGet, "sequences?queue=billing", readToken, nil)
			list, _ := out["sequences"].([]any)
			if code != 200 || len(list) != 1 {
				t.Fatalf("GET api/sequences = %d %v", code, out)
			}
			seq := list[0].(map[string]any)
			if hd, _ := seq["head"].(map[string]any); seq["key"] != slashed || seq["queue"] != "billing" || seq["waiting"] != 1.0 || hd["id"] != ids[0] || hd["state"] != "dead" || seq["dead_at"] == nil {
				t.Errorf("GET api/sequences lists %v", seq)
			}
			if code, out := s.apiCall(http.MethodGet, "sequences", readToken, nil); code != 200 || len(out["sequences"].([]any)) != 1 {
				t.Errorf("GET api/sequences = %d %v, want billing's alone (ledger's was released)", code, out)
			}
			if code, out := s.apiCall(http.MethodGet, "sequences?queue=elsewhere", readToken, nil); code != 200 || len(out["sequences"].([]any)) != 0 {
				t.Errorf("GET api/sequences?queue=elsewhere = %d %v, want none", code, out)
			}
			if code, out := s.apiCall(http.MethodGet, "sequences?q=x", readToken, nil); code != 400 {
				t.Errorf("GET api/sequences?q=x = %d %v, want 400", code, out)
			}
			body := map[string]string{"queue": "billing", "key": slashed}
			if code, out := s.apiCall(http.MethodPost, "sequences/release", readToken, body); code != 403 {
				t.Errorf("a release by a reader = %d %v, want 403", code, out)
			}
			code, out = s.apiCall(http.MethodPost, "sequences/release", actToken, body)
			hd, _ := out["head"].(map[string]any)
			if code != 200 || out["released"] != true || out["key"] != slashed || out["waiting"] != 1.0 || hd["id"] != ids[0] {
				t.Fatalf("POST api/sequences/release = %d %v", code, out)
			}
			if acts, _ := hd["actions"].([]any); len(acts) == 0 || acts[len(acts)-1].(map[string]any)["by"] != "deploy-bot" {
				t.Errorf("the released job's actions = %v, want the release by deploy-bot", hd["actions"])
			}
			if got := stateOf(t, q, ids[1]); got != driver.StateReady {
				t.Errorf("the next member is %s after the API's release, want ready", got)
			}
			if code, out := s.apiCall(http.MethodPost, "sequences/release", actToken, body); code != 404 {
				t.Errorf("a second release = %d %v, want 404", code, out)
			}
			if code, out := s.apiCall(http.MethodPost, "sequences/release", actToken, map[string]string{"queue": "ledger"}); code != 400 {
				t.Errorf("a release without a key = %d %v, want 400", code, out)
			}
			if code, out := s.apiCall(http.MethodPost, "sequences/release", actToken, `{"queue": "ledger", "key": "k", "head": "x"}`); code != 400 {
				t.Errorf("a release with an unknown field = %d %v, want 400", code, out)
			}
		})
	}
}

// TestReleaseSequenceRefused: a release needs the form token and a caller
// who may act; a stale button goes back to the page saying the sequence
// is no longer held.
func TestReleaseSequenceRefused(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ids := heldSequence(t, q, "ledger", "account:1", 2)
	s := serve(t, dashboard.ForQueue(q))
	p := s.page("sequences")
	f := formWithAction(p.Doc, "sequences/release")
	if f == nil {
		t.Fatalf("no Release form:\n%s", p.Body)
	}
	for _, c := range []struct {
		name    string
		headers map[string]string
		token   string
	}{
		{"no token", map[string]string{"Sec-Fetch-Site": "same-origin"}, ""},
		{"wrong token", map[string]string{"Sec-Fetch-Site": "same-origin"}, strings.Repeat("ab", 32)},
		{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, "from-the-page"},
	} {
		tok := c.token
		if tok == "from-the-page" {
			tok = attr(find(f, func(n *html.Node) bool { return attr(n, "name") == "csrf_token" }), "value")
		}
		body := url.Values{"csrf_token": {tok}, "queue": {"ledger"}, "key": {"account:1"}}.Encode()
		req, _ := http.NewRequest(http.MethodPost, s.url("sequences/release"), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		if r := s.do(req); r.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", c.name, r.StatusCode)
		}
		if got := stateOf(t, q, ids[1]); got != driver.StateSequenced {
			t.Fatalf("%s: a refused release let the next member run (%s)", c.name, got)
		}
	}
	if r := s.get(s.url("sequences/release")); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET sequences/release = %d, want 405", r.StatusCode)
	}

	// A reader sees no button, and may not post.
	ro := serve(t, dashboard.ForQueue(q), dashboard.Authorize(func(*http.Request) (bool, bool) { return true, false }))
	rp := ro.page("sequences")
	if formWithAction(rp.Doc, "sequences/release") != nil || find(rp.Doc, func(n *html.Node) bool { return attr(n, "data-key") == "account:1" }) == nil {
		t.Errorf("a reader's page lists the sequence without a Release button:\n%s", rp.Body)
	}

	// The button of a sequence released meanwhile.
	if err := q.ReleaseSequence(context.Background(), "ledger", "account:1"); err != nil {
		t.Fatal(err)
	}
	after := s.follow(s.submit(s.url("sequences"), f, nil, nil))
	if !strings.Contains(flashOf(after.Doc), "no longer held") {
		t.Errorf("a stale Release says %q", flashOf(after.Doc))
	}
}

// TestSequencesWithoutSequencer: over a store without sequences, and in
// cookbook mode, the page says so plainly, the sidebar has no link, and
// the API answers 404.
func TestSequencesWithoutSequencer(t *testing.T) {
	t.Parallel()
	plain := struct{ queue.Queue }{memqueue.New()} // hides every ability
	for name, src := range map[string]dashboard.Source{
		"driver without Sequencer": dashboard.ForQueue(plain),
		"cookbook":                 dashboard.NewInspector(dashboard.NewStats(), dashboard.NewMemoryFailedJobs(nil)),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, src, dashboard.BearerTokens(tokens))
			p := s.page("sequences")
			if find(p.Doc, byID("no-sequencer")) == nil || find(p.Doc, byID("sequences")) != nil {
				t.Errorf("the page does not say the store keeps no sequences:\n%s", p.Body)
			}
			if find(p.Doc, func(n *html.Node) bool { return n.Data == "a" && attr(n, "href") == "./sequences" }) != nil {
				t.Errorf("the sidebar links Sequences")
			}
			if code, out := s.apiCall(http.MethodGet, "sequences", readToken, nil); code != 404 {
				t.Errorf("GET api/sequences = %d %v, want 404", code, out)
			}
			if code, out := s.apiCall(http.MethodPost, "sequences/release", actToken, map[string]string{"queue": "q", "key": "k"}); code != 404 {
				t.Errorf("POST api/sequences/release = %d %v, want 404", code, out)
			}
		})
	}
}

// TestSequenceKeysEscaped: a key is user data; markup in it is shown as
// text, never run, and its Release button still releases it.
func TestSequenceKeysEscaped(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	const key = `<script>alert("k")</script><img src=x onerror=alert(1)>'&"/../x`
	const qname = `q<b>"`
	ids := heldSequence(t, q, qname, key, 2)
	s := serve(t, dashboard.ForQueue(q))
	p := s.page("sequences")
	if strings.Contains(p.Body, "<script>alert") || strings.Contains(p.Body, "<img src=x") || strings.Contains(p.Body, "<b>") {
		t.Fatalf("the key's markup reached the page unescaped:\n%s", p.Body)
	}
	if find(p.Doc, func(n *html.Node) bool { return n.Data == "script" && attr(n, "src") == "" }) != nil || find(p.Doc, byTag("img")) != nil {
		t.Fatalf("the page holds elements from the key:\n%s", p.Body)
	}
	row := find(p.Doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-key") == key })
	if row == nil || text(find(row, func(n *html.Node) bool { return strings.Contains(attr(n, "class"), "seq-key") })) != key {
		t.Fatalf("the key is not shown as its text:\n%s", p.Body)
	}
	if b := find(row, byTag("button")); !strings.Contains(attr(b, "data-confirm"), key) {
		t.Errorf("the confirmation does not name the key: %q", attr(b, "data-confirm"))
	}
	f := find(row, byTag("form"))
	after := s.follow(s.submit(s.url("sequences"), f, nil, nil))
	if !strings.Contains(flashOf(after.Doc), "Sequence released") {
		t.Errorf("releasing the hostile key says %q:\n%s", flashOf(after.Doc), after.Body)
	}
	if got := stateOf(t, q, ids[1]); got != driver.StateReady {
		t.Errorf("the next member is %s, want ready", got)
	}
	// A filter by a hostile queue name is shown as text too.
	fp := s.page("sequences?" + url.Values{"queue": {qname}}.Encode())
	if strings.Contains(fp.Body, "<b>") || text(find(fp.Doc, byID("sequences-queue"))) != qname {
		t.Errorf("the queue filter is not shown as its text:\n%s", fp.Body)
	}
}

// TestSequencedTab lists the members waiting behind a held sequence's
// head under the job list's "sequenced" tab, on every store that keeps
// sequences; a store without them has no such tab and refuses the state
// with a message naming the states it has.
func TestSequencedTab(t *testing.T) {
	for _, st := range sequenceStores {
		t.Run(st.name, func(t *testing.T) {
			q := st.open(t)
			ids := heldSequence(t, q, "ledger", "acct:7", 3)
			s := serve(t, dashboard.ForQueue(q))
			r := s.page("jobs?state=ready&queue=ledger")
			tab := find(r.Doc, func(n *html.Node) bool { return n.Data == "a" && attr(n, "data-state") == "sequenced" })
			if tab == nil {
				t.Fatal("no sequenced tab on the job list")
			}
			r = s.page("jobs?state=sequenced&queue=ledger")
			for _, id := range ids[1:] {
				if !strings.Contains(r.Body, id) {
					t.Errorf("the sequenced tab does not list waiting member %s", id)
				}
			}
			if strings.Contains(r.Body, ids[0]) {
				t.Errorf("the sequenced tab lists the dead head %s", ids[0])
			}
		})
	}
	t.Run("without", func(t *testing.T) {
		s := serve(t, dashboard.ForQueue(struct{ queue.Queue }{memqueue.New()})) // hides every ability
		r := s.get(s.url("jobs?state=sequenced"))
		if r.StatusCode != http.StatusBadRequest || strings.Contains(r.Body, "sequenced,") {
			t.Errorf("state=sequenced without sequences: %d, want 400 without sequenced among the states:\n%s", r.StatusCode, r.Body)
		}
	})
}

// TestOverviewCountsHeldSequences: the overview's row of a queue with
// sequences held by a dead head says how many, on every store that keeps
// sequences; a queue without any says nothing of them, and neither does
// the overview once the sequences are released.
func TestOverviewCountsHeldSequences(t *testing.T) {
	t.Parallel()
	for _, st := range sequenceStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			q := st.open(t)
			s := serve(t, dashboard.ForQueue(q))
			heldSequence(t, q, "ledger", "account:1", 2)
			heldSequence(t, q, "ledger", "account:2", 2)
			heldSequence(t, q, "mail", "user:7", 3)
			plain, err := queue.NewJob(struct{}{}, queue.OnQueue("plain"))
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Push(context.Background(), plain); err != nil {
				t.Fatal(err)
			}
			lines := func() map[string]string {
				t.Helper()
				p := s.page("")
				out := map[string]string{}
				for _, row := range findAll(p.Doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-queue") != "" }) {
					for _, w := range findAll(row, func(n *html.Node) bool { return strings.Contains(attr(n, "class"), "warning") }) {
						if strings.Contains(text(w), "held by a dead job") {
							out[attr(row, "data-queue")] = text(w)
						}
					}
				}
				return out
			}
			got := lines()
			if !strings.HasPrefix(got["ledger"], "2 sequences are held") || !strings.HasPrefix(got["mail"], "1 sequence is held") || got["plain"] != "" {
				t.Fatalf("the overview's held-sequence lines = %q; want 2 for ledger, 1 for mail, none for plain", got)
			}
			ss, ok := q.(driver.Sequencer)
			if !ok {
				t.Fatalf("%T keeps sequences but is no driver.Sequencer", q)
			}
			for _, k := range [][2]string{{"ledger", "account:1"}, {"ledger", "account:2"}, {"mail", "user:7"}} {
				if err := ss.ReleaseSequence(context.Background(), k[0], k[1]); err != nil {
					t.Fatal(err)
				}
			}
			if got := lines(); len(got) != 0 {
				t.Errorf("after the releases the overview still says %q", got)
			}
		})
	}
}
