package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Monitored tags, as Horizon has them: the Tags page lists the monitored
// tags and monitors another; a tag's page shows its recent and failed jobs
// as the store recorded them (driver.TagMonitor), kept apart from the
// retention of finished jobs, with a link to the jobs carrying it that the
// store still holds. The same under api/tags.

// TagSource is a Source that monitors tags: the Tags pages and api/tags.
// The handler offers them when the Source is a TagSource and its
// Abilities().Tags is set. ForQueue's Source is one; it works when its
// driver has driver.TagMonitor.
type TagSource interface {
	// MonitorTag starts monitoring tag; an invalid tag (driver.CheckTag)
	// or one past driver.MaxMonitoredTags fails with an error wrapping
	// queue.ErrInvalid.
	MonitorTag(ctx context.Context, tag string) error
	// UnmonitorTag stops monitoring tag and drops its records.
	UnmonitorTag(ctx context.Context, tag string) error
	// MonitoredTags lists the monitored tags, sorted.
	MonitoredTags(ctx context.Context) ([]string, error)
	// TaggedJobs returns tag's recent (or failed) jobs, newest first, at
	// most driver.MaxTaggedJobs.
	TaggedJobs(ctx context.Context, tag string, failed bool) ([]driver.TaggedJob, error)
}

// errBadTag marks a tag the store refused; tagRule says why.
var errBadTag = errors.New("dashboard: bad tag")

// tagRule is what a monitored tag must be.
var tagRule = fmt.Sprintf("a monitored tag is 1 to %d bytes of UTF-8 without NUL, and at most %d tags are monitored at once",
	driver.MaxKeyBytes, driver.MaxMonitoredTags)

// tagged is the store's TagMonitor, or an error wrapping
// queue.ErrUnsupported.
func (qi *QueueInspector) tagged(doing string) (driver.TagMonitor, error) {
	if qi.tags == nil {
		return nil, fmt.Errorf("dashboard: %s: %w", doing, queue.ErrUnsupported)
	}
	return qi.tags, nil
}

// MonitorTag starts monitoring tag (see TagSource).
func (qi *QueueInspector) MonitorTag(ctx context.Context, tag string) error {
	tm, err := qi.tagged("monitoring a tag")
	if err != nil {
		return err
	}
	return tm.MonitorTag(ctx, tag)
}

// UnmonitorTag stops monitoring tag (see TagSource).
func (qi *QueueInspector) UnmonitorTag(ctx context.Context, tag string) error {
	tm, err := qi.tagged("unmonitoring a tag")
	if err != nil {
		return err
	}
	return tm.UnmonitorTag(ctx, tag)
}

// MonitoredTags lists the monitored tags (see TagSource).
func (qi *QueueInspector) MonitoredTags(ctx context.Context) ([]string, error) {
	tm, err := qi.tagged("listing the monitored tags")
	if err != nil {
		return nil, err
	}
	return tm.MonitoredTags(ctx)
}

// TaggedJobs returns a tag's recorded jobs (see TagSource).
func (qi *QueueInspector) TaggedJobs(ctx context.Context, tag string, failed bool) ([]driver.TaggedJob, error) {
	tm, err := qi.tagged("reading a tag's jobs")
	if err != nil {
		return nil, err
	}
	return tm.TaggedJobs(ctx, tag, failed)
}

// tagsOf returns the handler's TagSource, or nil when it offers no tags.
func (h *handler) tagsOf() TagSource {
	ts, ok := h.src.(TagSource)
	if !ok || !h.src.Abilities().Tags {
		return nil
	}
	return ts
}

// tagErr marks the store's refusal of a tag as errBadTag.
func tagErr(err error) error {
	if errors.Is(err, queue.ErrInvalid) {
		return fmt.Errorf("%w: %w", errBadTag, err)
	}
	return err
}

// tagURL is the address of tag's page, or of an action on it, relative to
// the dashboard root.
func tagURL(base, tag, verb string) string {
	u := base + "tags/" + url.PathEscape(tag)
	if verb != "" {
		u += "/" + verb
	}
	return u
}

type tagsData struct {
	Controls bool
	Rows     []tagRow
	MaxJobs  int
	MaxTags  int
	// MonitorURL is where the form to monitor a tag posts.
	MonitorURL string
}

type tagRow struct {
	Tag, URL, UnmonitorURL string
}

// tagsPage serves GET tags: the monitored tags and a form to add one.
func (h *handler) tagsPage(w http.ResponseWriter, r *http.Request) {
	ts := h.tagsOf()
	if ts == nil {
		h.failErr(w, r, "Listing the monitored tags", queue.ErrUnsupported)
		return
	}
	tags, err := ts.MonitoredTags(r.Context())
	if err != nil {
		h.failErr(w, r, "Listing the monitored tags", err)
		return
	}
	base := relBase(r)
	d := tagsData{Controls: canAct(r), MaxJobs: driver.MaxTaggedJobs, MaxTags: driver.MaxMonitoredTags, MonitorURL: base + "tags/monitor"}
	for _, t := range tags {
		d.Rows = append(d.Rows, tagRow{Tag: t, URL: tagURL(base, t, ""), UnmonitorURL: tagURL(base, t, "unmonitor")})
	}
	h.render(w, r, http.StatusOK, "tags", h.newPage(w, r, "Monitored tags", "tags", d))
}

type tagData struct {
	Tag       string
	Monitored bool
	Failed    bool
	Jobs      []tagJobRow
	MaxJobs   int
	// RecentURL and FailedURL are the page's two tabs; JobsURL lists the
	// jobs carrying the tag that the store still holds.
	RecentURL, FailedURL, JobsURL string
	UnmonitorURL, MonitorURL      string
	Controls                      bool
}

type tagJobRow struct {
	driver.TaggedJob
	// URL is the job's page (it may be gone: retention).
	URL string
}

// tagPage serves GET tags/{tag}: the tag's recent jobs, or its failed
// ones with ?list=failed.
func (h *handler) tagPage(w http.ResponseWriter, r *http.Request) {
	ts := h.tagsOf()
	if ts == nil {
		h.failErr(w, r, "Reading a tag's jobs", queue.ErrUnsupported)
		return
	}
	tag := r.PathValue("tag")
	failed, err := tagList(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, `Reading a tag's jobs: list must be "recent" or "failed".`, nil)
		return
	}
	tags, err := ts.MonitoredTags(r.Context())
	if err != nil {
		h.failErr(w, r, "Reading a tag's jobs", err)
		return
	}
	jobs, err := ts.TaggedJobs(r.Context(), tag, failed)
	if err != nil {
		h.failErr(w, r, "Reading a tag's jobs", err)
		return
	}
	base := relBase(r)
	page := tagURL(base, tag, "")
	d := tagData{Tag: tag, Failed: failed, MaxJobs: driver.MaxTaggedJobs, Controls: canAct(r),
		RecentURL: page, FailedURL: page + "?list=failed",
		JobsURL:      base + "jobs?" + url.Values{"tag": {tag}}.Encode(),
		UnmonitorURL: tagURL(base, tag, "unmonitor"), MonitorURL: base + "tags/monitor"}
	for _, t := range tags {
		d.Monitored = d.Monitored || t == tag
	}
	for _, j := range jobs {
		row := tagJobRow{TaggedJob: j}
		if h.src.Abilities().Detail {
			row.URL = base + "jobs/" + url.PathEscape(j.ID)
		}
		d.Jobs = append(d.Jobs, row)
	}
	h.render(w, r, http.StatusOK, "tag", h.newPage(w, r, "Tag "+tag, "tags", d))
}

// tagList reads ?list=: recent (the default) or failed.
func tagList(v url.Values) (failed bool, err error) {
	switch v.Get("list") {
	case "", "recent":
		return false, nil
	case "failed":
		return true, nil
	}
	return false, errBadTag
}

// tagAction serves POST tags/monitor (the form's tag) and POST
// tags/{tag}/unmonitor.
func (h *handler) tagAction(w http.ResponseWriter, r *http.Request) {
	ts := h.tagsOf()
	if ts == nil {
		h.failErr(w, r, "Changing the monitored tags", queue.ErrUnsupported)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/unmonitor") {
		tag := r.PathValue("tag")
		if err := ts.UnmonitorTag(r.Context(), tag); err != nil {
			h.failErr(w, r, "Unmonitoring the tag", err)
			return
		}
		back(w, r, "tags", "tagunmonitored", -1, false)
		return
	}
	tag := strings.TrimSpace(r.PostFormValue("tag"))
	if err := ts.MonitorTag(r.Context(), tag); err != nil {
		h.failErr(w, r, "Monitoring the tag", tagErr(err))
		return
	}
	u, _ := url.Parse(tagURL("", tag, ""))
	u.RawQuery = url.Values{"flash": {"tagmonitored"}}.Encode()
	seeOther(w, relBase(r)+u.String())
}

type apiTags struct {
	Tags    []string `json:"tags"`
	MaxJobs int      `json:"max_jobs"`
	MaxTags int      `json:"max_tags"`
}

type apiTag struct {
	Tag       string         `json:"tag"`
	Monitored bool           `json:"monitored"`
	List      string         `json:"list"`
	Jobs      []apiTaggedJob `json:"jobs"`
	ReadAt    time.Time      `json:"read_at"`
}

type apiTaggedJob struct {
	ID       string    `json:"id"`
	Queue    string    `json:"queue"`
	Name     string    `json:"name"`
	State    string    `json:"state"`
	At       time.Time `json:"at"`
	Attempts int       `json:"attempts"`
	Error    string    `json:"error,omitempty"`
}

// apiTagsList serves GET api/tags.
func (h *handler) apiTagsList(w http.ResponseWriter, r *http.Request) {
	ts := h.tagsOf()
	if ts == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	tags, err := ts.MonitoredTags(r.Context())
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	writeJSON(w, apiTags{Tags: append([]string{}, tags...), MaxJobs: driver.MaxTaggedJobs, MaxTags: driver.MaxMonitoredTags})
}

// apiTagJobs serves GET api/tags/{tag}?list=recent|failed.
func (h *handler) apiTagJobs(w http.ResponseWriter, r *http.Request) {
	ts := h.tagsOf()
	if ts == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	failed, err := tagList(r.URL.Query())
	if err != nil {
		h.apiStatus(w, http.StatusBadRequest, `list must be "recent" or "failed"`)
		return
	}
	h.writeTag(w, r, ts, r.PathValue("tag"), failed)
}

// writeTag answers with tag's list.
func (h *handler) writeTag(w http.ResponseWriter, r *http.Request, ts TagSource, tag string, failed bool) {
	tags, err := ts.MonitoredTags(r.Context())
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	jobs, err := ts.TaggedJobs(r.Context(), tag, failed)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	out := apiTag{Tag: tag, List: "recent", Jobs: make([]apiTaggedJob, len(jobs)), ReadAt: time.Now().UTC()}
	if failed {
		out.List = "failed"
	}
	for _, t := range tags {
		out.Monitored = out.Monitored || t == tag
	}
	for i, j := range jobs {
		out.Jobs[i] = apiTaggedJob{ID: j.ID, Queue: j.Queue, Name: j.Name, State: string(j.State), At: utc(j.At), Attempts: j.Attempts, Error: j.Error}
	}
	writeJSON(w, out)
}

// apiTagAction serves POST api/tags/{tag}/monitor and /unmonitor: the
// tag's recent list after the change.
func (h *handler) apiTagAction(w http.ResponseWriter, r *http.Request) {
	ts := h.tagsOf()
	if ts == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	tag := r.PathValue("tag")
	var err error
	if strings.HasSuffix(r.URL.Path, "/unmonitor") {
		err = ts.UnmonitorTag(r.Context(), tag)
	} else {
		err = tagErr(ts.MonitorTag(r.Context(), tag))
	}
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	h.writeTag(w, r, ts, tag, false)
}

// tagRoutes adds the Tags pages, their actions and their API to m.
func (h *handler) tagRoutes(m *router) {
	m.HandleFunc("GET /queues/tags", h.tagsPage)
	m.HandleFunc("GET /queues/tags/{tag}", h.tagPage)
	m.HandleFunc("POST /queues/tags/monitor", h.tagAction)
	m.HandleFunc("POST /queues/tags/{tag}/unmonitor", h.tagAction)
	m.HandleFunc("GET /queues/api/tags", h.apiTagsList)
	m.HandleFunc("GET /queues/api/tags/{tag}", h.apiTagJobs)
	m.HandleFunc("POST /queues/api/tags/{tag}/monitor", h.apiTagAction)
	m.HandleFunc("POST /queues/api/tags/{tag}/unmonitor", h.apiTagAction)
}
