package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// tabWait is how long a list page waits, once its rows are read, for the
// figures that fill its tab counts before it shows the tabs without them.
const tabWait = 100 * time.Millisecond

// chartWindow is how far back the charts reach.
const chartWindow = time.Hour

type overviewData struct {
	Stats      StatsView
	Throughput *chart
	Runtime    *chart
	Queues     []queueRow
	// ChartsFailed: reading the metrics failed, the charts are left out.
	ChartsFailed bool
}

type queueRow struct {
	QueueStats
	URL string
	// Warnings are the lines the Warnings option gave for this queue.
	Warnings []string
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sv, err := h.src.Figures(ctx)
	if err != nil {
		h.failErr(w, r, "Reading the queue stats", err)
		return
	}
	d := overviewData{Stats: sv}
	base := relBase(r)
	warn := h.warnings(ctx)
	held, capped := h.heldCounts(ctx)
	for _, q := range sv.Queues {
		lines := warn[q.Queue]
		if q.Unserved {
			lines = append(slices.Clip(lines), display.Count(q.Ready)+" ready jobs wait and no live worker serves this queue")
		}
		if n := held[q.Queue]; n > 0 {
			lines = append(slices.Clip(lines), heldLine(n, capped))
		}
		d.Queues = append(d.Queues, queueRow{q, base + "queue/" + url.PathEscape(q.Queue), lines})
	}
	if h.src.Abilities().Charts {
		// The charts are figures too: a failed read leaves them out
		// rather than failing the page.
		now := time.Now()
		if pts, err := h.src.Metrics(ctx, now.Add(-chartWindow)); err == nil {
			d.Throughput = throughputChart(pts, "", now)
			if h.src.Abilities().Runtime {
				d.Runtime = runtimeChart(pts, "", now)
			}
		} else {
			d.ChartsFailed = true
			h.cfg.logger.Warn("dashboard: reading the metrics", "err", err)
		}
	}
	p := h.newPage(w, r, "Overview", "overview", d)
	p.sharedFigures(sv, true)
	h.render(w, r, http.StatusOK, "overview", p)
}

// jobsData is the model of the job lists (failed jobs and jobs by state).
type jobsData struct {
	Query  ListQuery
	Dead   bool
	States []stateTab
	Rows   []jobRow
	Pager  pager
	Action string   // the list's own URL, for the filter form
	Clear  string   // the list without filters
	Queues []string // known queue names, suggested by the queue filter
	// Errors shows a last-error column: failed jobs, and jobs waiting to
	// be retried.
	Errors   bool
	Tags     bool // some row has tags: show the column
	Filtered bool // a filter or search narrows the list
	// Cancel offers cancel buttons: the jobs have not finished, the
	// Source can cancel and the caller may act.
	Cancel bool
	// The confirmation pages of the "all matching" actions, "" when the
	// list offers none.
	RetryAll, ForgetAll, CancelAll string
	// Scanned is how many jobs a payload search examined when it stopped
	// at its row bound ("10,000"), "" otherwise; Among says which ones
	// ("the 10,000 most recent", "the next 10,000") and the pager's next
	// link continues the search.
	Scanned string
	Among   string
	// Index says, on a page that searches, whether the store's payload
	// search index is on ("on", "off"), "" when the Source keeps none
	// (SearchIndexSource).
	Index string
	// Table shows the rows' table: there are rows, or the page searches
	// (it shows the table before it knows whether a row will come, as it
	// writes its rows as the search finds them). Found: some job is
	// listed; without one, the page says why under the (empty) table.
	Table bool
	Found bool
	// Stopped says why a search stopped early, on a store error after it
	// had begun, "" otherwise; it is a row of the table, Columns wide.
	Stopped string
	Columns int
}

type stateTab struct {
	State  driver.JobState
	Label  string
	Count  string // "" when unknown (done jobs, or narrowed by filters)
	URL    string
	Active bool
}

type jobRow struct {
	JobView
	URL       string // the detail page, "" without detail pages
	QueueURL  string
	NameURL   string // the list filtered by the job's name
	TagURLs   []namedLink
	RetryURL  string
	ForgetURL string
	CancelURL string
}

// readQuery reads the list filters and the page position from the URL.
func readQuery(r *http.Request, state driver.JobState) (ListQuery, pageRef) {
	v := r.URL.Query()
	q := ListQuery{
		State: state,
		Queue: clip(v.Get("queue")), Name: clip(v.Get("name")), Tag: clip(v.Get("tag")),
		Search: clip(v.Get("q")),
	}
	ref := readPageRef(v)
	q.After, q.Page = ref.After, max(ref.Page, 1)
	return q, ref
}

// listJobs reads a page of jobs from the source, hiding what pages must
// not show.
func (h *handler) listJobs(ctx context.Context, q ListQuery) (JobList, error) {
	l, err := h.src.List(ctx, q)
	if err == nil && q.Search != "" {
		// A call that fails mid-search ends it with what was found:
		// Next and Scanned say where to go on.
		l, _ = h.searchAll(ctx, q, l)
	}
	for i := range l.Jobs {
		l.Jobs[i] = hide(l.Jobs[i])
	}
	return l, err
}

// getJob reads one job from the source, hiding what pages must not show.
func (h *handler) getJob(ctx context.Context, id string) (JobView, error) {
	j, err := h.src.Job(ctx, id)
	return hide(j), err
}

// clip bounds a filter value from the URL.
func clip(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.TrimSpace(s)
}

// values returns the filters as URL parameters, without the page position.
func (q ListQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"queue": q.Queue, "name": q.Name, "tag": q.Tag, "q": q.Search} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// stateLabel names a state as the pages show it: dead jobs are "failed".
// states are the job states the lists serve: driver.JobStates,
// driver.StateGrouped when the store gathers groups, and
// driver.StateSequenced (members waiting behind their sequence's head)
// when it keeps sequences.
func (h *handler) states() []driver.JobState {
	c := h.src.Abilities()
	out := driver.JobStates
	if c.Groups {
		out = append(slices.Clip(out), driver.StateGrouped)
	}
	if c.Sequences && c.Browse {
		out = append(slices.Clip(out), driver.StateSequenced)
	}
	return out
}

func stateLabel(s driver.JobState) string {
	if s == queue.StateDead {
		return "failed"
	}
	return string(s)
}

// stateWords names states as the pages' URLs take them.
func stateWords(states []driver.JobState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = stateLabel(s)
	}
	return out
}

// stateTitle is stateLabel with a capital letter.
func stateTitle(s driver.JobState) string {
	l := stateLabel(s)
	if l == "" {
		return "Unknown"
	}
	return strings.ToUpper(l[:1]) + l[1:]
}

func (h *handler) failed(w http.ResponseWriter, r *http.Request) {
	h.list(w, r, queue.StateDead)
}

func (h *handler) jobs(w http.ResponseWriter, r *http.Request) {
	if id := clip(r.URL.Query().Get("id")); id != "" && h.src.Abilities().Detail {
		// The job-ID box: straight to the job's page.
		seeOther(w, relBase(r)+"jobs/"+url.PathEscape(id))
		return
	}
	st := driver.JobState(r.URL.Query().Get("state"))
	if st == "failed" {
		// The pages call dead jobs failed; accept the word in URLs too.
		st = queue.StateDead
	}
	if st == "" {
		st = queue.StateReady
	}
	if !slices.Contains(h.states(), st) {
		h.fail(w, r, http.StatusBadRequest, "There is no job state "+strconv.Quote(clip(string(st)))+
			": use "+strings.Join(stateWords(h.states()), ", ")+".", nil)
		return
	}
	h.list(w, r, st)
}

func (h *handler) list(w http.ResponseWriter, r *http.Request, st driver.JobState) {
	q, ref := readQuery(r, st)
	c := h.src.Abilities()
	base := relBase(r)
	dead := st == queue.StateDead
	self := base + "jobs"
	if dead {
		self = base + "failed"
	}
	if !c.Browse {
		// Without browsing, lists page by number; only pending jobs are
		// listed by queue, the failed list is one list.
		cq := ListQuery{State: st, Page: q.Page}
		if !dead {
			cq.Queue = q.Queue
		}
		q = cq
	}
	if err := checkSearch(q.Search); err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error(), nil)
		return
	}
	ctx := r.Context()
	// The state tabs count from the figures, which are shared between
	// requests (statsTTL), so the store sees no more QueueStats calls
	// for them; when they are not fresh, read them beside the list rather
	// than after it.
	type figures struct {
		sv  StatsView
		err error
	}
	figc := make(chan figures, 1)
	if c.Browse {
		go func() {
			sv, err := h.src.Figures(ctx)
			figc <- figures{sv, err}
		}()
	}
	// A list that searches a store through a time-budgeted scan sends
	// its rows as the search finds them (streamList), when the response
	// can be flushed; other lists, and the live region a refresh asks
	// for, are rendered whole.
	streams := q.Search != "" && c.Browse && r.Header.Get("X-Meridian-Partial") == "" && canFlush(w)
	res, err := h.src.List(ctx, q)
	var stopped error // a store error that ended the search after its first call
	if err == nil && q.Search != "" && !streams {
		res, stopped = h.searchAll(ctx, q, res)
	}
	if err != nil && q.Search != "" && !isUnsupported(err) && !errors.Is(err, queue.ErrBadCursor) {
		h.fail(w, r, http.StatusServiceUnavailable, "The payload search did not finish: it is bounded in time and rows "+
			"so that it cannot slow the store down. Narrow it with a queue, name or tag filter and try again.", err)
		return
	}
	if err != nil {
		h.failErr(w, r, "Listing "+stateLabel(st)+" jobs", err)
		return
	}
	d := &jobsData{Query: q, Dead: dead, Action: self, Errors: dead}
	if q.Search != "" {
		d.Index = h.searchIndex(ctx)
	}
	d.Cancel = c.Cancel && cancellable(st) && canAct(r)
	d.Filtered = q.Name != "" || q.Tag != "" || q.Search != ""
	if q.Search != "" && c.Browse {
		// A page that searches draws its table, with every column a
		// match may need, before it reads the matches: the same page
		// whether it is streamed or rendered whole.
		d.Table, d.Errors, d.Tags = true, true, true
	}
	if c.Browse && canAct(r) {
		switch {
		case dead:
			d.RetryAll, d.ForgetAll = confirmURL(base, driver.BulkRetry, q), confirmURL(base, driver.BulkForget, q)
		case d.Cancel:
			d.CancelAll = confirmURL(base, driver.BulkCancel, q)
		}
	}
	filters := q.values()
	if !dead {
		filters.Set("state", string(st))
	}
	var tabFigures *StatsView // the shared figures the tab counts show
	if c.Browse {
		d.Clear = self
		if !dead {
			d.Clear += "?state=" + string(st)
		}
		// A failure to read the figures only hides the counts, and so
		// does a read that is still going tabWait after the list: the
		// rows never wait for the figures.
		var fig figures
		select {
		case fig = <-figc:
		case <-time.After(tabWait):
			fig.err = errors.New("the figures took longer than the list")
		}
		sv, err := fig.sv, fig.err
		if err != nil {
			h.cfg.logger.Warn("dashboard: reading the queue stats for the state tabs", "err", err)
		}
		var counts *QueueStats
		if err == nil {
			for _, qs := range sv.Queues {
				d.Queues = append(d.Queues, qs.Queue)
			}
			if q.Queue == "" {
				counts = &sv.Totals
			}
			for i := range sv.Queues {
				if sv.Queues[i].Queue == q.Queue {
					counts = &sv.Queues[i]
				}
			}
		}
		for _, s := range h.states() {
			v := q.values()
			v.Set("state", string(s))
			u := base + "jobs?" + v.Encode()
			if s == queue.StateDead {
				v.Del("state")
				u = base + "failed" + encodeQuery(v)
			}
			tab := stateTab{State: s, Label: stateLabel(s), URL: u, Active: s == st}
			if counts != nil && !d.Filtered && c.ByState {
				tab.Count = stateCount(*counts, s)
				tabFigures = &sv
			}
			d.States = append(d.States, tab)
		}
	}
	// rows are the table rows of jobs.
	rows := func(jobs []JobView) []jobRow {
		out := make([]jobRow, 0, len(jobs))
		for _, j := range jobs {
			row := jobRow{JobView: hide(j)}
			id := url.PathEscape(j.ID)
			if c.Detail {
				row.URL = base + "jobs/" + id
			}
			if c.Browse {
				row.QueueURL = base + "queue/" + url.PathEscape(j.QueueName())
				v := cloneValues(filters)
				v.Set("name", j.Name)
				row.NameURL = self + encodeQuery(v)
				for _, tag := range j.Tags {
					v := cloneValues(filters)
					v.Set("tag", tag)
					row.TagURLs = append(row.TagURLs, namedLink{tag, self + encodeQuery(v)})
				}
			}
			if d.Cancel {
				row.CancelURL = base + "jobs/" + id + "/cancel"
			}
			if dead {
				row.RetryURL = base + "failed/" + id + "/retry"
				row.ForgetURL = base + "failed/" + id + "/forget"
			}
			if j.LastError != "" {
				d.Errors = true
			}
			if len(j.Tags) > 0 {
				d.Tags = true
			}
			out = append(out, row)
		}
		return out
	}
	// end fills in what the page says once the search or listing is
	// over: where it stopped, and the pages after it.
	end := func(res JobList, stopped error) {
		if res.Scanned > 0 && res.Next != "" {
			d.Scanned = display.Int(int64(res.Scanned))
			switch {
			case q.After != "":
				d.Among = "the next " + d.Scanned
			case st == queue.StateDead || st == queue.StateDone || st == queue.StateCancelled:
				d.Among = "the " + d.Scanned + " most recent"
			default:
				d.Among = "the first " + d.Scanned + " in line"
			}
		}
		if c.Browse {
			d.Pager = keysetPager(self, filters, ref, res.Next)
		} else {
			d.Pager = numberPager(self, filters, q.Page, res.NextPage > 0)
		}
		d.Columns = 5 // ID, name, queue, attempts, time
		for _, on := range []bool{d.Tags, d.Errors, dead && canAct(r) || d.Cancel, dead && canAct(r) || d.Cancel} {
			if on {
				d.Columns++ // and the select box and actions
			}
		}
		if stopped != nil {
			h.cfg.logger.Error("dashboard: the payload search stopped", "path", r.URL.Path, "err", stopped)
			d.Stopped = stoppedText
		}
	}
	title, nav := stateTitle(st)+" jobs", "jobs"
	if dead {
		title, nav = "Failed jobs", "failed"
	}
	if streams {
		h.streamList(w, r, q, title, nav, d, res, rows, end)
		return
	}
	d.Rows = rows(res.Jobs)
	d.Found = len(d.Rows) > 0
	d.Table = d.Table || d.Found
	end(res, stopped)
	p := h.newPage(w, r, title, nav, *d)
	if tabFigures != nil {
		p.sharedFigures(*tabFigures, false)
	}
	h.render(w, r, http.StatusOK, "jobs", p)
}

// stateCount is a queue's count of jobs in state s, "" when the figures do
// not count that state.
func stateCount(qs QueueStats, s driver.JobState) string {
	switch s {
	case queue.StateReady:
		return display.Count(qs.Ready)
	case queue.StateScheduled:
		return display.Count(qs.Scheduled)
	case queue.StateRunning:
		return display.Count(qs.Running)
	case queue.StateDead:
		return display.Count(qs.Dead)
	case queue.StateDone, queue.StateCancelled:
		// Only a store that counts them (queue.Counter) fills these; a
		// zero may be one that does not.
		c := qs.Done
		if s == queue.StateCancelled {
			c = qs.Cancelled
		}
		if c.N > 0 {
			return display.Count(c)
		}
	}
	return ""
}

func encodeQuery(v url.Values) string {
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

type jobData struct {
	Job       JobView
	Payload   string
	JSON      bool // Payload is pretty-printed JSON
	Binary    bool // Payload is shown quoted: it is not UTF-8
	Leased    bool
	CancelURL string // "" when the job cannot be cancelled from here
	RetryURL  string
	ForgetURL string
	QueueURL  string
	Dead      bool
	// MaxAttempt is the job's attempt limit as the page can tell it
	// (see attemptLimit), and MaxNote says where it comes from.
	MaxAttempt string
	MaxNote    string
	MaxHistory int    // driver.MaxHistory: a history this long may have lost older attempts
	ListURL    string // the list the job is in
	ListName   string
	// SequencesURL lists the held sequences of the job's queue, for a
	// sequence member over a Source that keeps sequences; "" otherwise.
	SequencesURL string
	// RunNowURL and AmendURL are the job actions the job's state allows
	// (amendLinks), "" for none: run a scheduled job now, retry a failed
	// job or run a kept cancelled or done one again. Editable: its type
	// is registered (JobType), so its payload can be edited, starting
	// from EditPayload.
	RunNowURL string
	AmendURL  string
	// CloneURL pushes a copy of the job under a new ID (any state the
	// store keeps the job in).
	CloneURL    string
	Editable    bool
	EditPayload string
	// Result is the job's result (queue.SetResult) as shown, "" for none;
	// ResultJSON says it is JSON.
	Result     string
	ResultJSON bool
}

func (h *handler) job(w http.ResponseWriter, r *http.Request) {
	j, err := h.getJob(r.Context(), r.PathValue("id"))
	if isNotFound(err) {
		h.fail(w, r, http.StatusNotFound, "There is no job "+r.PathValue("id")+" in the store now. "+
			"It may have finished (drivers delete finished jobs unless set to retain them), "+
			"or been forgotten or flushed from the failed jobs.", nil)
		return
	}
	if err != nil {
		h.failErr(w, r, "Reading the job", err)
		return
	}
	base := relBase(r)
	id := url.PathEscape(j.ID)
	d := jobData{
		Job: j, Dead: j.State == queue.StateDead,
		Leased:    j.State == queue.StateRunning || !j.LeaseExpiresAt.IsZero(),
		RetryURL:  base + "failed/" + id + "/retry",
		ForgetURL: base + "failed/" + id + "/forget",
		QueueURL:  base + "queue/" + url.PathEscape(j.QueueName()),
	}
	if h.src.Abilities().Cancel && cancellable(j.State) && canAct(r) {
		d.CancelURL = base + "jobs/" + id + "/cancel"
	}
	if key, _ := driver.SequenceOf(j.Job); key != "" && h.src.Abilities().Sequences {
		d.SequencesURL = base + "sequences?" + url.Values{"queue": {j.QueueName()}}.Encode()
	}
	switch qn := j.QueueName(); {
	case !h.src.Abilities().Browse:
		d.ListURL, d.ListName = base+"failed", "Failed jobs"
	case d.Dead:
		d.ListURL, d.ListName = base+"failed?"+url.Values{"queue": {qn}}.Encode(), "Failed jobs of "+qn
	default:
		d.ListURL = base + "jobs?" + url.Values{"state": {string(j.State)}, "queue": {qn}}.Encode()
		d.ListName = stateTitle(j.State) + " jobs of " + qn
	}
	d.Payload, d.JSON, d.Binary = showPayload(j.Payload)
	d.Result, d.ResultJSON = h.jobResult(r.Context(), j.ID)
	d.MaxHistory = driver.MaxHistory
	d.MaxAttempt, d.MaxNote = h.attemptLimit(r.Context(), j)
	h.amendLinks(r, &d)
	nav := "jobs"
	if d.Dead {
		nav = "failed"
	}
	h.render(w, r, http.StatusOK, "job", h.newPage(w, r, "Job "+shortID(j.ID), nav, d))
}

// maxShownPayload bounds the payload a page shows.
const maxShownPayload = 256 << 10

// showPayload pretty-prints a JSON payload; other text is shown as is and
// bytes that are not UTF-8 are shown Go-quoted.
func showPayload(p []byte) (text string, isJSON, binary bool) {
	cut := len(p) > maxShownPayload
	if cut {
		p = p[:maxShownPayload]
	}
	var buf bytes.Buffer
	switch {
	case !cut && json.Valid(p) && json.Indent(&buf, p, "", "  ") == nil:
		return buf.String(), true, false
	case utf8.Valid(p):
		text = string(p)
	default:
		text, binary = strconv.Quote(string(p)), true
	}
	if cut {
		text += "\n… (cut at 256 KiB)"
	}
	return text, false, binary
}

type queueData struct {
	Stats      QueueStats
	Known      bool
	Throughput *chart
	Runtime    *chart
	States     []stateLink
	Pending    []jobRow
	PauseURL   string
	ResumeURL  string
	FailedURL  string
	JobsURL    string
	// SequencesURL lists the queue's held sequences, "" when the Source
	// keeps none.
	SequencesURL string
}

type stateLink struct {
	State driver.JobState
	Label string
	Count string
	URL   string
}

func (h *handler) queue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx := r.Context()
	sv, err := h.src.Figures(ctx)
	if err != nil {
		h.failErr(w, r, "Reading the queue stats", err)
		return
	}
	base := relBase(r)
	esc := url.PathEscape(name)
	d := queueData{
		PauseURL:  base + "queue/" + esc + "/pause",
		ResumeURL: base + "queue/" + esc + "/resume",
		FailedURL: base + "failed?" + url.Values{"queue": {name}}.Encode(),
		JobsURL:   base + "jobs?" + url.Values{"state": {"ready"}, "queue": {name}}.Encode(),
	}
	if h.src.Abilities().Sequences {
		d.SequencesURL = base + "sequences?" + url.Values{"queue": {name}}.Encode()
	}
	if !h.src.Abilities().Browse {
		// Without browsing the failed list is not split by queue.
		d.FailedURL = base + "failed"
	}
	d.Stats.Queue = name
	for _, q := range sv.Queues {
		if q.Queue == name {
			d.Stats, d.Known = q, true
		}
	}
	c := h.src.Abilities()
	if c.Charts {
		now := time.Now()
		pts, err := h.src.Metrics(ctx, now.Add(-chartWindow))
		if err != nil {
			h.failErr(w, r, "Reading the metrics", err)
			return
		}
		d.Throughput = throughputChart(pts, name, now)
		if c.Runtime {
			d.Runtime = runtimeChart(pts, name, now)
		}
	}
	if c.ByState {
		s := d.Stats
		for _, sl := range []struct {
			st driver.JobState
			n  driver.Count
		}{{queue.StateReady, s.Ready}, {queue.StateScheduled, s.Scheduled}, {queue.StateRunning, s.Running}, {queue.StateDead, s.Dead}} {
			u := base + "jobs?" + url.Values{"state": {string(sl.st)}, "queue": {name}}.Encode()
			if sl.st == queue.StateDead {
				u = d.FailedURL
			}
			d.States = append(d.States, stateLink{sl.st, stateLabel(sl.st), display.Count(sl.n), u})
		}
	}
	res, err := h.listJobs(ctx, ListQuery{State: queue.StateReady, Queue: name, Page: 1, Limit: 10})
	if err == nil {
		for _, j := range res.Jobs[:min(10, len(res.Jobs))] {
			row := jobRow{JobView: j}
			if c.Detail {
				row.URL = base + "jobs/" + url.PathEscape(j.ID)
			}
			d.Pending = append(d.Pending, row)
		}
	} else if !isUnsupported(err) {
		h.failErr(w, r, "Listing the queue's jobs", err)
		return
	}
	p := h.newPage(w, r, "Queue "+name, "overview", d)
	p.sharedFigures(sv, false)
	h.render(w, r, http.StatusOK, "queue", p)
}

type workersData struct {
	Rows        []workerRow
	Pager       pager
	Total       int // worker processes in the registry
	Concurrency int // their summed concurrency
	// Running and Reserved are the jobs they hold, summed: in handlers,
	// and leased but not in a handler (prefetched, or awaiting their ack
	// flush), as each reported with its last heartbeat.
	Running, Reserved int
	Stale             int // how many have not been seen for staleAfter
	// Fleet is set when the workers can be commanded (FleetSource);
	// FleetPaused while the whole fleet is paused; Paused counts the
	// workers paused (by the fleet's pause or their own).
	Fleet       bool
	FleetPaused bool
	Paused      int
	FleetURL    string // the fleet's action URLs: FleetURL + "/terminate" and so on
}

type workerRow struct {
	driver.WorkerInfo
	Stale     bool
	QueueURLs []namedLink
	// RunningN and ReservedN are the worker's held jobs summed over its
	// queues; HeldBy says them per queue ("" when it holds none).
	RunningN, ReservedN int
	HeldBy              string
	Paused              bool   // by the fleet's pause or its own
	OwnPause            bool   // paused on its own (its Continue button undoes it)
	ActionURL           string // its fleet actions: ActionURL + "/terminate" and so on
}

// heldBy sums a worker's held jobs and says them per queue, sorted:
// "emails: 2 running, 5 reserved; reports: 1 running".
func heldBy(wi driver.WorkerInfo) (running, reserved int, by string) {
	names := slices.Sorted(maps.Keys(wi.Running))
	for name := range wi.Reserved {
		if _, ok := wi.Running[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var parts []string
	for _, name := range names {
		r, p := wi.Running[name], wi.Reserved[name]
		running, reserved = running+r, reserved+p
		var say []string
		if r > 0 {
			say = append(say, display.Int(int64(r))+" running")
		}
		if p > 0 {
			say = append(say, display.Int(int64(p))+" reserved")
		}
		if len(say) > 0 {
			parts = append(parts, name+": "+strings.Join(say, ", "))
		}
	}
	return running, reserved, strings.Join(parts, "; ")
}

// namedLink is a link labelled with a name (a queue, a tag).
type namedLink struct{ Name, URL string }

// staleAfter is how long a worker may go unseen before the page greys it
// out; drivers drop entries some time later.
const staleAfter = time.Minute

func (h *handler) workers(w http.ResponseWriter, r *http.Request) {
	ws, err := h.src.Workers(r.Context())
	if err != nil {
		h.failErr(w, r, "Listing the workers", err)
		return
	}
	// The registry lists workers sorted by ID, all at once; the page shows
	// PageSize of them from a keyset cursor (the last ID shown).
	slices.SortFunc(ws, func(a, b driver.WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	d := workersData{Total: len(ws)}
	pausedIDs := map[string]bool{}
	if fs := h.fleetOf(); fs != nil {
		fleet, ids, err := fs.PausedWorkers(r.Context())
		if err != nil {
			h.failErr(w, r, "Reading the workers' pauses", err)
			return
		}
		d.Fleet, d.FleetPaused = true, fleet
		for _, id := range ids {
			pausedIDs[id] = true
		}
	}
	for _, wi := range ws {
		if d.FleetPaused || pausedIDs[wi.ID] {
			d.Paused++
		}
		d.Concurrency += wi.Concurrency
		running, reserved, _ := heldBy(wi)
		d.Running, d.Reserved = d.Running+running, d.Reserved+reserved
		if time.Since(wi.LastSeen) > staleAfter {
			d.Stale++
		}
	}
	ref := readPageRef(r.URL.Query())
	from, _ := slices.BinarySearchFunc(ws, ref.After, func(wi driver.WorkerInfo, id string) int {
		if strings.Compare(wi.ID, id) <= 0 {
			return -1
		}
		return 1
	})
	if ref.After == "" {
		from = 0
	}
	page := ws[from:min(len(ws), from+PageSize)]
	next := ""
	if from+len(page) < len(ws) {
		next = page[len(page)-1].ID
	}
	base := relBase(r)
	d.Pager = keysetPager(base+"workers", url.Values{}, ref, next)
	if d.Fleet {
		d.FleetURL = base + "workers"
	}
	for _, wi := range page {
		row := workerRow{WorkerInfo: wi, Stale: time.Since(wi.LastSeen) > staleAfter, Paused: d.FleetPaused || pausedIDs[wi.ID], OwnPause: pausedIDs[wi.ID]}
		if d.Fleet {
			row.ActionURL = base + "workers/" + url.PathEscape(wi.ID)
		}
		row.RunningN, row.ReservedN, row.HeldBy = heldBy(wi)
		for _, q := range wi.Queues {
			row.QueueURLs = append(row.QueueURLs, namedLink{q, base + "queue/" + url.PathEscape(q)})
		}
		d.Rows = append(d.Rows, row)
	}
	h.render(w, r, http.StatusOK, "workers", h.newPage(w, r, "Workers", "workers", d))
}

// Actions. Each answers with a redirect (303) to a page relative to the
// action's URL, carrying a flash code; refusals are 403 pages, never
// redirects.

// back redirects to the form's return page (or fallback), both relative
// to the dashboard root. The return page keeps its page position (the rows
// acted on leave it, the others stay), unless first is set.
func back(w http.ResponseWriter, r *http.Request, fallback, flash string, n int, first bool) {
	ret := safeReturn(r.PostFormValue("return"))
	if ret == "" {
		ret = fallback
	}
	u, _ := url.Parse(ret)
	q := u.Query()
	if first {
		pageRef{}.set(q)
	}
	q.Set("flash", flash)
	if n >= 0 {
		q.Set("n", strconv.Itoa(n))
	}
	u.RawQuery = q.Encode()
	seeOther(w, relBase(r)+u.String())
}

func (h *handler) retryOne(w http.ResponseWriter, r *http.Request) {
	retry := h.src.RetryJob
	if _, ok := h.amender(); ok {
		// Recorded in the job's history, with who retried it.
		retry = func(ctx context.Context, id string) error {
			_, err := h.amendJob(ctx, id, driver.AmendRetry, nil)
			if errors.Is(err, driver.ErrJobState) {
				return fmt.Errorf("dashboard: retrying job %s: %w", id, ErrNotFound)
			}
			return err
		}
	}
	h.actOne(w, r, retry, "retried")
}

func (h *handler) forgetOne(w http.ResponseWriter, r *http.Request) {
	h.actOne(w, r, h.src.ForgetJob, "forgotten")
}

func (h *handler) actOne(w http.ResponseWriter, r *http.Request, act func(ctx context.Context, id string) error, flash string) {
	id := r.PathValue("id")
	err := act(r.Context(), id)
	switch {
	case isNotFound(err):
		back(w, r, "failed", "gone", -1, false)
	case err != nil:
		h.failErr(w, r, "The action", err)
	default:
		// The job page of a retried or forgotten job is gone or moved on:
		// go to the failed list instead.
		if strings.HasPrefix(r.PostFormValue("return"), "jobs/") {
			r.PostForm.Set("return", "failed")
		}
		back(w, r, "failed", flash, 1, false)
	}
}

func (h *handler) flush(w http.ResponseWriter, r *http.Request) {
	n, err := h.src.Flush(r.Context(), clip(r.PostFormValue("queue")))
	if err != nil {
		h.failErr(w, r, "Flushing the failed jobs", err)
		return
	}
	if n < 0 {
		back(w, r, "failed", "flushed", -1, true)
		return
	}
	back(w, r, "failed", "flushedn", n, true)
}

// maxBulk bounds one bulk action: the selected ids, or the first rows that
// match the filter.
const maxBulk = 500

func (h *handler) bulk(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// do is "retry-selected", "forget-selected", "retry-matching" or
	// "forget-matching".
	action, scope, _ := strings.Cut(r.PostFormValue("do"), "-")
	act := h.src.RetryJob
	flash := "retried"
	if action == "forget" {
		act, flash = h.src.ForgetJob, "forgotten"
	}
	ids := r.PostForm["id"]
	more := false
	if scope == "matching" {
		if !h.src.Abilities().Browse {
			h.fail(w, r, http.StatusNotFound, "Acting on every matching job needs a queue driver.", nil)
			return
		}
		q := ListQuery{
			State: queue.StateDead, Queue: clip(r.PostFormValue("queue")), Name: clip(r.PostFormValue("name")),
			Tag: clip(r.PostFormValue("tag")), Search: clip(r.PostFormValue("q")), Limit: maxBulk,
		}
		a := driver.BulkRetry
		if action == "forget" {
			a = driver.BulkForget
		}
		if n, more, ok, err := h.actOnMatching(ctx, q, a); ok {
			if err != nil {
				h.failErr(w, r, "The bulk action (after "+strconv.Itoa(n)+" jobs)", err)
				return
			}
			if more {
				flash = "more"
			}
			back(w, r, "failed", flash, n, true)
			return
		}
		res, err := h.listJobs(ctx, q)
		if err != nil {
			h.failErr(w, r, "Listing the matching jobs", err)
			return
		}
		ids = nil
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
		more = res.Next != ""
	}
	if len(ids) == 0 {
		back(w, r, "failed", "none", -1, false)
		return
	}
	if len(ids) > maxBulk {
		ids, more = ids[:maxBulk], true
	}
	n := 0
	for _, id := range ids {
		err := act(ctx, id)
		switch {
		case err == nil:
			n++
		case isNotFound(err):
		default:
			h.failErr(w, r, "The bulk action (after "+strconv.Itoa(n)+" jobs)", err)
			return
		}
	}
	if more {
		flash = "more"
	}
	back(w, r, "failed", flash, n, scope == "matching")
}

func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	paused := strings.HasSuffix(r.URL.Path, "/pause")
	if err := h.src.SetPaused(r.Context(), name, paused); err != nil {
		h.failErr(w, r, "Pausing or resuming the queue", err)
		return
	}
	flash := "resumed"
	if paused {
		flash = "paused"
	}
	seeOther(w, "../"+url.PathEscape(name)+"?flash="+flash)
}

// heldShown is how many held sequences the overview reads at most.
const heldShown = 100

// heldCounts counts the sequences held by a dead head per queue, from
// one read of up to heldShown of them (the Sequences page's); capped is
// set when there were more, and the counts are then at least the true
// ones. None when the Source keeps no sequences or the read fails
// (logged: the overview shows its other figures).
func (h *handler) heldCounts(ctx context.Context) (n map[string]int, capped bool) {
	ss, ok := h.src.(SequenceSource)
	if !ok || !h.src.Abilities().Sequences {
		return nil, false
	}
	held, err := ss.HeldSequences(ctx, "", heldShown+1)
	if err != nil {
		h.cfg.logger.Warn("dashboard: counting held sequences", "err", err)
		return nil, false
	}
	n = map[string]int{}
	for _, s := range held[:min(len(held), heldShown)] {
		n[s.Queue]++
	}
	return n, len(held) > heldShown
}

// heldLine is a queue's overview line for n sequences held by a dead
// head (or n at least, when capped).
func heldLine(n int, capped bool) string {
	count := strconv.Itoa(n) + " sequences are"
	switch {
	case capped:
		count = strconv.Itoa(n) + " or more sequences are"
	case n == 1:
		count = "1 sequence is"
	}
	return count + " held by a dead job: their later members wait until it is retried, forgotten or released (Sequences page)"
}

// warnings reads the Warnings option's lines, none without it.
func (h *handler) warnings(ctx context.Context) map[string][]string {
	if h.cfg.warnings == nil {
		return nil
	}
	return h.cfg.warnings(ctx)
}

// attemptLimit says what limits j's attempts, and where the limit comes
// from: the job's own MaxAttempts when it carries one (for a dead letter,
// the limit that applied when it failed for good: the worker stores it,
// see driver.Completion.MaxAttempts, so it holds after that worker has
// gone); otherwise the
// MaxAttempts setting the live workers serving its queue report with
// their heartbeats (driver.WorkerInfo.MaxAttempts), as one number when
// they agree and each with its workers when they differ; and
// queue.DefaultMaxAttempts, said as such, when no live worker serves the
// queue or the Source lists no workers.
func (h *handler) attemptLimit(ctx context.Context, j JobView) (limit, note string) {
	if j.MaxAttempts > 0 {
		if j.State == queue.StateDead {
			return display.Int(int64(j.MaxAttempts)), "the limit that applied when it failed for good: the job's own, or its worker's setting"
		}
		return display.Int(int64(j.MaxAttempts)), "set on the job"
	}
	qn := j.QueueName()
	def := display.Int(int64(queue.DefaultMaxAttempts))
	if !h.src.Abilities().Workers {
		return def, "the default: a worker's MaxAttempts setting overrides it"
	}
	ws, err := h.src.Workers(ctx)
	if err != nil {
		h.cfg.logger.Warn("dashboard: listing the workers for a job's attempt limit", "job", j.ID, "err", err)
		return def, "the default; the workers could not be listed, and a worker's MaxAttempts setting overrides it"
	}
	byLimit := map[int]int{} // limit (0: not reported) -> live workers serving qn
	for _, wi := range ws {
		if time.Since(wi.LastSeen) <= staleAfter && slices.Contains(wi.Queues, qn) {
			byLimit[wi.MaxAttempts]++
		}
	}
	limits := slices.Sorted(maps.Keys(byLimit))
	switch {
	case len(limits) == 0:
		return def, "the default: no live worker serves queue " + qn + " now; the setting of the worker that takes the job decides"
	case len(limits) == 1 && limits[0] > 0:
		return display.Int(int64(limits[0])), "the setting of the workers serving queue " + qn
	}
	parts := make([]string, 0, len(limits))
	shown := make([]string, 0, len(limits))
	for _, n := range limits {
		who := display.Int(int64(byLimit[n])) + " worker"
		if byLimit[n] != 1 {
			who += "s"
		}
		if n == 0 {
			parts = append(parts, who+" of an earlier release, which report none")
			continue
		}
		shown = append(shown, display.Int(int64(n)))
		parts = append(parts, display.Int(int64(n))+" on "+who)
	}
	if len(shown) == 0 {
		shown = append(shown, "unknown")
	}
	return strings.Join(shown, " or "), "the workers serving queue " + qn + " differ: " + strings.Join(parts, ", ") + "; the worker that takes the job decides"
}
