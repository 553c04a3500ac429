package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// mountPrefix is where the tests mount the dashboard, as the cookbook does.
const mountPrefix = "/admin"

// site is a dashboard mounted under /admin/queues/ on a test server, with a
// browser-like client: a cookie jar, and redirects not followed so tests
// can check them.
type site struct {
	t   *testing.T
	srv *httptest.Server
	c   *http.Client
}

func serve(t *testing.T, src dashboard.Source, opts ...dashboard.Option) *site {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/admin/queues/", http.StripPrefix(mountPrefix, dashboard.Handler(src, opts...)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &site{t: t, srv: srv, c: c}
}

// url returns the absolute URL of a path under the dashboard root.
func (s *site) url(rel string) string { return s.srv.URL + "/admin/queues/" + rel }

// response is a fetched page, parsed.
type response struct {
	*http.Response
	Body string
	Doc  *html.Node
}

func (s *site) do(req *http.Request) response {
	s.t.Helper()
	res, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	r := response{Response: res, Body: string(b)}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		doc, err := html.Parse(strings.NewReader(r.Body))
		if err != nil {
			s.t.Fatalf("parsing %s: %v", req.URL, err)
		}
		r.Doc = doc
	}
	return r
}

// get fetches an absolute URL.
func (s *site) get(u string) response {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return s.do(req)
}

// page fetches a page under the root and requires 200.
func (s *site) page(rel string) response {
	s.t.Helper()
	r := s.get(s.url(rel))
	if r.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s: %d\n%s", rel, r.StatusCode, r.Body)
	}
	return r
}

// submit posts the form f of the page at pageURL as a same-origin browser
// would, with the button's name=value pair when button is not nil, plus
// extra fields.
func (s *site) submit(pageURL string, f *html.Node, button *html.Node, extra url.Values) response {
	s.t.Helper()
	action := resolve(s.t, pageURL, attr(f, "action"))
	vals := url.Values{}
	for _, in := range findAll(f, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") != "" }) {
		if typ := attr(in, "type"); typ == "checkbox" && !hasAttr(in, "checked") {
			continue
		}
		vals.Add(attr(in, "name"), attr(in, "value"))
	}
	if button != nil && attr(button, "name") != "" {
		vals.Set(attr(button, "name"), attr(button, "value"))
	}
	for k, vs := range extra {
		vals[k] = vs
	}
	req, _ := http.NewRequest(http.MethodPost, action, strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return s.do(req)
}

// follow resolves a redirect's Location against the request URL, checks
// it stays under the mount point, and fetches it.
func (s *site) follow(r response) response {
	s.t.Helper()
	if r.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("want 303 See Other, got %d\n%s", r.StatusCode, r.Body)
	}
	loc := r.Header.Get("Location")
	if strings.HasPrefix(loc, "/") || strings.Contains(loc, "://") {
		s.t.Fatalf("redirect Location %q is not relative", loc)
	}
	u := resolve(s.t, r.Request.URL.String(), loc)
	if !strings.HasPrefix(u, s.srv.URL+"/admin/queues/") {
		s.t.Fatalf("redirect %q from %s leaves the mount point: %s", loc, r.Request.URL, u)
	}
	return s.get(u)
}

func resolve(t *testing.T, base, ref string) string {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u, err := b.Parse(ref)
	if err != nil {
		t.Fatalf("bad link %q: %v", ref, err)
	}
	return u.String()
}

// HTML helpers over golang.org/x/net/html.

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func find(n *html.Node, match func(*html.Node) bool) *html.Node {
	if all := findAll(n, match); len(all) > 0 {
		return all[0]
	}
	return nil
}

func byID(id string) func(*html.Node) bool {
	return func(n *html.Node) bool { return attr(n, "id") == id }
}

func byTag(tag string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag }
}

func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// rowIDs returns the data-id of every row of the jobs table.
func rowIDs(doc *html.Node) []string {
	var ids []string
	for _, tr := range findAll(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-id") != "" }) {
		ids = append(ids, attr(tr, "data-id"))
	}
	return ids
}

// formWithAction finds the form whose action ends with suffix.
func formWithAction(doc *html.Node, suffix string) *html.Node {
	return find(doc, func(n *html.Node) bool { return n.Data == "form" && strings.HasSuffix(attr(n, "action"), suffix) })
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
	for len(ids) > 0 {
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
		}
	}
	return ids
}

// confirmMatching follows the "all matching" link linkID of the list at
// listRel to its confirmation page, checks that the page counts want jobs
// ("" to skip the check), and submits it.
func (s *site) confirmMatching(listRel, linkID, want string) response {
	s.t.Helper()
	list := s.page(listRel)
	link := find(list.Doc, byID(linkID))
	if link == nil {
		s.t.Fatalf("%s has no %s link:\n%s", listRel, linkID, list.Body)
	}
	u := resolve(s.t, s.url(listRel), attr(link, "href"))
	conf := s.get(u)
	if conf.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s: %d\n%s", u, conf.StatusCode, conf.Body)
	}
	if want != "" {
		if got := text(find(conf.Doc, byID("confirm-count"))); !strings.Contains(got, want) {
			s.t.Fatalf("confirmation of %s says %q, want it to count %q", linkID, got, want)
		}
	}
	btn := find(conf.Doc, byID("confirm-bulk"))
	if btn == nil {
		s.t.Fatalf("confirmation page of %s has no confirm button:\n%s", linkID, conf.Body)
	}
	f := find(conf.Doc, func(n *html.Node) bool { return n.Data == "form" && find(n, byID("confirm-bulk")) != nil })
	return s.submit(u, f, btn, nil)
}
