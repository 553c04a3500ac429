package dashboard_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/memqueue"
)

// TestWarningsMarkQueues checks that the Warnings option's lines mark
// their queue's row on the overview and reach api/stats, and that queues
// without warnings stay unmarked.
func TestWarningsMarkQueues(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	deadJobs(t, q, "emails", 1, `{}`, "smtp: 550")
	deadJobs(t, q, "reports", 1, `{}`, "timeout")
	const line = "queue emails long wait crossed"
	s := serve(t, dashboard.ForQueue(q), dashboard.Warnings(func(context.Context) map[string][]string {
		return map[string][]string{"emails": {line}}
	}))

	page := s.page("")
	row := func(queue string) *html.Node {
		return find(page.Doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-queue") == queue })
	}
	emails, reports := row("emails"), row("reports")
	if emails == nil || reports == nil {
		t.Fatalf("overview lacks a queue row:\n%s", page.Body)
	}
	if attr(emails, "class") != "warn" || !strings.Contains(text(emails), line) {
		t.Errorf("emails row: class %q, text %q; want marked with %q", attr(emails, "class"), text(emails), line)
	}
	if attr(reports, "class") != "" || strings.Contains(text(reports), line) {
		t.Errorf("reports row is marked: class %q, text %q", attr(reports, "class"), text(reports))
	}

	var stats struct {
		Queues []struct {
			Queue    string   `json:"queue"`
			Warnings []string `json:"warnings"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(s.get(s.url("api/stats")).Body), &stats); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, q := range stats.Queues {
		got[q.Queue] = q.Warnings
	}
	if len(got["emails"]) != 1 || got["emails"][0] != line || got["reports"] != nil {
		t.Errorf("api/stats warnings = %v; want only emails: [%s]", got, line)
	}
}
