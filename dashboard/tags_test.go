package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// TestMonitoredTags monitors a tag from the Tags page, reads its recent
// and failed jobs on its page and through the API (records of jobs the
// store no longer holds included), refuses a bad tag, and stops
// monitoring it.
func TestMonitoredTags(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	s := serve(t, dashboard.ForQueue(q))
	const tag = "customer 42/eu"

	p := s.page("tags")
	if find(p.Doc, byID("no-tags")) == nil {
		t.Fatalf("the Tags page of a store with no monitored tag does not say so:\n%s", p.Body)
	}
	f := find(p.Doc, byID("monitor-tag"))
	if f == nil {
		t.Fatalf("no form to monitor a tag:\n%s", p.Body)
	}
	after := s.follow(s.submit(s.url("tags"), f, nil, url.Values{"tag": {tag}}))
	if !strings.Contains(flashOf(after.Doc), "Tag monitored") || text(find(after.Doc, byID("tag-name"))) != tag || find(after.Doc, byID("no-tag-jobs")) == nil {
		t.Fatalf("after Monitor the page says %q:\n%s", flashOf(after.Doc), after.Body)
	}
	if got, _ := q.MonitoredTags(ctx); len(got) != 1 || got[0] != tag {
		t.Fatalf("MonitoredTags = %q after the form, want [%q]", got, tag)
	}

	// A job the store no longer holds (never pushed here) still shows, with its error.
	at := time.Now().Add(-time.Minute)
	if err := q.RecordTagged(ctx, []driver.TaggedJob{
		{Tag: tag, ID: "gone-1", Queue: "mail", Name: "SendInvoice", State: driver.StateDone, At: at, Attempts: 1},
		{Tag: tag, ID: "gone-2", Queue: "mail", Name: "SendInvoice", State: driver.StateDead, At: at.Add(time.Second), Attempts: 3, Error: "smtp: 550 mailbox unavailable"},
	}); err != nil {
		t.Fatal(err)
	}
	p = s.page("tags")
	link := find(p.Doc, func(n *html.Node) bool { return n.Data == "a" && hasAttr(n, "href") && text(n) == tag })
	if link == nil {
		t.Fatalf("the Tags page does not link the monitored tag:\n%s", p.Body)
	}
	p = s.get(resolve(t, s.url("tags"), attr(link, "href")))
	if got := rowIDs(p.Doc); strings.Join(got, ",") != "gone-2,gone-1" {
		t.Fatalf("the tag's recent jobs = %v, want gone-2, gone-1:\n%s", got, p.Body)
	}
	if !strings.Contains(text(find(p.Doc, byID("tag-jobs"))), "smtp: 550 mailbox unavailable") {
		t.Errorf("the failed job's error is not shown:\n%s", p.Body)
	}
	failedTab := find(p.Doc, func(n *html.Node) bool { return n.Data == "a" && attr(n, "data-list") == "failed" })
	fp := s.get(resolve(t, p.Request.URL.String(), attr(failedTab, "href")))
	if got := rowIDs(fp.Doc); strings.Join(got, ",") != "gone-2" {
		t.Errorf("the tag's failed jobs = %v, want gone-2", got)
	}

	// The API.
	var list struct {
		Tags    []string `json:"tags"`
		MaxJobs int      `json:"max_jobs"`
		MaxTags int      `json:"max_tags"`
	}
	if r := s.get(s.url("api/tags")); r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &list) != nil ||
		len(list.Tags) != 1 || list.MaxJobs != driver.MaxTaggedJobs || list.MaxTags != driver.MaxMonitoredTags {
		t.Errorf("GET api/tags = %d %s", r.StatusCode, r.Body)
	}
	var one struct {
		Tag       string `json:"tag"`
		Monitored bool   `json:"monitored"`
		List      string `json:"list"`
		Jobs      []struct {
			ID, State, Error string
			Attempts         int
		} `json:"jobs"`
	}
	r := s.get(s.url("api/tags/" + url.PathEscape(tag) + "?list=failed"))
	if r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &one) != nil || one.Tag != tag || !one.Monitored || one.List != "failed" ||
		len(one.Jobs) != 1 || one.Jobs[0].ID != "gone-2" || one.Jobs[0].State != "dead" || one.Jobs[0].Attempts != 3 || one.Jobs[0].Error == "" {
		t.Errorf("GET api/tags/{tag}?list=failed = %d %s", r.StatusCode, r.Body)
	}
	post := func(path string) response {
		req, _ := http.NewRequest(http.MethodPost, s.url(path), nil)
		req.Header.Set("Origin", s.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for _, c := range s.c.Jar.Cookies(req.URL) {
			if c.Name == "meridian_csrf" {
				req.Header.Set("X-Csrf-Token", c.Value)
			}
		}
		return s.do(req)
	}
	for path, want := range map[string]int{
		"api/tags/" + strings.Repeat("x", 256) + "/monitor": 400,
		"api/tags/vip/monitor":                              200,
		"api/tags/vip/unmonitor":                            200,
		"api/tags/never/unmonitor":                          200,
	} {
		if r := post(path); r.StatusCode != want {
			t.Errorf("POST %.40s = %d %s, want %d", path, r.StatusCode, r.Body, want)
		}
	}
	if r := s.get(s.url("api/tags/vip?list=all")); r.StatusCode != 400 {
		t.Errorf("GET api/tags/vip?list=all = %d, want 400", r.StatusCode)
	}

	// Read-only: no forms, and the actions are refused.
	ro := serve(t, dashboard.ForQueue(q), dashboard.Authorize(func(*http.Request) (bool, bool) { return true, false }))
	if p := ro.page("tags"); find(p.Doc, byID("monitor-tag")) != nil || find(p.Doc, func(n *html.Node) bool { return hasAttr(n, "data-unmonitor") }) != nil {
		t.Error("a read-only dashboard offers to change the monitored tags")
	}

	// Stop monitoring from the tag's page: the records go.
	p = s.page("tags/" + url.PathEscape(tag))
	stop := find(p.Doc, func(n *html.Node) bool {
		return n.Data == "form" && find(n, func(b *html.Node) bool { return hasAttr(b, "data-unmonitor") }) != nil
	})
	after = s.follow(s.submit(p.Request.URL.String(), stop, nil, nil))
	if !strings.Contains(flashOf(after.Doc), "no longer monitored") || find(after.Doc, byID("tag-not-monitored")) == nil {
		t.Errorf("after Stop monitoring the page says %q:\n%s", flashOf(after.Doc), after.Body)
	}
	if recs, _ := q.TaggedJobs(ctx, tag, false); len(recs) != 0 {
		t.Errorf("%d records kept after unmonitoring", len(recs))
	}
}
