package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The Batches page, a batch's page and api/batches.

// BatchSource is a Source that also serves batches (queue.Batch): the
// Batches page, a batch's page with its members, cancel and retry of its
// failed members, and api/batches. The handler offers them when the Source
// is a BatchSource and its Abilities().Batches is set. ForQueue's Source is
// one; its batches work when its driver has driver.Workflows.
type BatchSource interface {
	// ListBatches pages through the batches, newest first.
	ListBatches(ctx context.Context, f driver.BatchFilter) (driver.BatchPage, error)
	// GetBatch reads one batch, or fails with an error wrapping ErrNotFound.
	GetBatch(ctx context.Context, id string) (driver.BatchInfo, error)
	// BatchMembers pages through a batch's members.
	BatchMembers(ctx context.Context, id string, f driver.MemberFilter) (driver.MemberPage, error)
	// CancelBatch cancels a batch and its members not yet finished.
	CancelBatch(ctx context.Context, id string) (driver.BatchInfo, error)
	// RetryFailedMembers moves up to limit of the batch's dead-lettered
	// members back to ready and reports how many it moved and whether
	// more failed members remain.
	RetryFailedMembers(ctx context.Context, id string, limit int) (n int, more bool, err error)
}

// batcher returns the driver's Workflows, or an error wrapping
// queue.ErrUnsupported.
func (qi *QueueInspector) batcher(doing string) (driver.Workflows, error) {
	if qi.wf == nil {
		return nil, fmt.Errorf("dashboard: %s: %w", doing, queue.ErrUnsupported)
	}
	return qi.wf, nil
}

// ListBatches lists the driver's batches (see BatchSource).
func (qi *QueueInspector) ListBatches(ctx context.Context, f driver.BatchFilter) (driver.BatchPage, error) {
	b, err := qi.batcher("listing batches")
	if err != nil {
		return driver.BatchPage{}, err
	}
	return b.ListBatches(ctx, f)
}

// GetBatch reads one of the driver's batches (see BatchSource).
func (qi *QueueInspector) GetBatch(ctx context.Context, id string) (driver.BatchInfo, error) {
	b, err := qi.batcher("reading a batch")
	if err != nil {
		return driver.BatchInfo{}, err
	}
	return b.GetBatch(ctx, id)
}

// BatchMembers lists a batch's members (see BatchSource).
func (qi *QueueInspector) BatchMembers(ctx context.Context, id string, f driver.MemberFilter) (driver.MemberPage, error) {
	b, err := qi.batcher("listing a batch's members")
	if err != nil {
		return driver.MemberPage{}, err
	}
	return b.BatchMembers(ctx, id, f)
}

// CancelBatch cancels a batch (see BatchSource).
func (qi *QueueInspector) CancelBatch(ctx context.Context, id string) (driver.BatchInfo, error) {
	b, err := qi.batcher("cancelling a batch")
	if err != nil {
		return driver.BatchInfo{}, err
	}
	return b.CancelBatch(ctx, id)
}

// RetryFailedMembers retries a batch's dead-lettered members through the
// driver's RetryDead, a page at a time (see BatchSource). A member retried
// or forgotten by someone else meanwhile is skipped.
func (qi *QueueInspector) RetryFailedMembers(ctx context.Context, id string, limit int) (int, bool, error) {
	b, err := qi.batcher("retrying a batch's failed members")
	if err != nil {
		return 0, false, err
	}
	n := 0
	f := driver.MemberFilter{State: driver.MemberFailed, Limit: min(limit, driver.MaxBatchPage)}
	for {
		page, err := b.BatchMembers(ctx, id, f)
		if err != nil {
			return n, false, err
		}
		for _, m := range page.Members {
			if n == limit {
				return n, true, nil
			}
			switch err := qi.q.RetryDead(ctx, m.JobID); {
			case err == nil:
				n++
			case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrDuplicate):
			default:
				return n, false, err
			}
		}
		if page.Next == "" {
			return n, false, nil
		}
		f.After = page.Next
	}
}

// batchesOf returns the handler's BatchSource, or nil when it serves no
// batches.
func (h *handler) batchesOf() BatchSource {
	bs, ok := h.src.(BatchSource)
	if !ok || !h.src.Abilities().Batches {
		return nil
	}
	return bs
}

// batchBar is a batch's progress as the widths (in percent) of its done,
// failed and cancelled parts, for an SVG bar (the CSP allows no style
// attributes).
type batchBar struct {
	Done, Failed, Cancelled float64
	// FailedX and CancelledX are where the failed and cancelled parts
	// start.
	FailedX, CancelledX float64
}

func barOf(b driver.BatchInfo) batchBar {
	if b.Total == 0 {
		return batchBar{}
	}
	pct := func(n int) float64 { return float64(n) * 100 / float64(b.Total) }
	bar := batchBar{Done: pct(b.Done), Failed: pct(b.Failed), Cancelled: pct(b.Cancelled)}
	bar.FailedX = bar.Done
	bar.CancelledX = bar.Done + bar.Failed
	return bar
}

// batchRow is one batch on the Batches page or at the head of its own.
type batchRow struct {
	driver.BatchInfo
	URL    string
	Bar    batchBar
	Status string // running, finished, cancelled
}

func (h *handler) batchRow(r *http.Request, b driver.BatchInfo) batchRow {
	st := "running"
	switch {
	case !b.CancelledAt.IsZero():
		st = "cancelled"
	case b.Finished():
		st = "finished"
	}
	return batchRow{BatchInfo: b, URL: relBase(r) + "batches/" + url.PathEscape(b.ID), Bar: barOf(b), Status: st}
}

type batchesData struct {
	Rows []batchRow
	pager
}

// batchesPage lists the batches, newest first, a page at a time.
func (h *handler) batchesPage(w http.ResponseWriter, r *http.Request) {
	bs := h.batchesOf()
	if bs == nil {
		h.failErr(w, r, "The batches page", queue.ErrUnsupported)
		return
	}
	ref := readPageRef(r.URL.Query())
	page, err := bs.ListBatches(r.Context(), driver.BatchFilter{Limit: PageSize, After: ref.After})
	if err != nil {
		h.failErr(w, r, "Listing the batches", err)
		return
	}
	var d batchesData
	for _, b := range page.Batches {
		d.Rows = append(d.Rows, h.batchRow(r, b))
	}
	d.pager = keysetPager("batches", url.Values{}, ref, page.Next)
	h.render(w, r, http.StatusOK, "batches", h.newPage(w, r, "Batches", "batches", d))
}

// memberRow is one member on a batch's page.
type memberRow struct {
	driver.BatchMember
	URL string // the job's page, "" without job detail
}

type batchData struct {
	Batch   batchRow
	State   driver.BatchMemberState // the members tab shown, "" for all
	Tabs    []memberTab
	Members []memberRow
	pager
	CancelURL string // "" when the batch can no longer be cancelled
	RetryURL  string // "" when no member failed
}

type memberTab struct {
	Label  string
	URL    string
	Active bool
	N      int
}

// batchPage shows one batch: its progress, its actions and its members.
func (h *handler) batchPage(w http.ResponseWriter, r *http.Request) {
	bs := h.batchesOf()
	if bs == nil {
		h.failErr(w, r, "The batch page", queue.ErrUnsupported)
		return
	}
	id := r.PathValue("id")
	b, err := bs.GetBatch(r.Context(), id)
	if err != nil {
		h.failErr(w, r, "Reading the batch", err)
		return
	}
	q := r.URL.Query()
	state := driver.BatchMemberState(q.Get("state"))
	switch state {
	case "", driver.MemberPending, driver.MemberDone, driver.MemberFailed, driver.MemberCancelled:
	default:
		h.fail(w, r, http.StatusBadRequest, "Unknown member state.", nil)
		return
	}
	ref := readPageRef(q)
	page, err := bs.BatchMembers(r.Context(), id, driver.MemberFilter{State: state, After: ref.After, Limit: PageSize})
	if err != nil {
		h.failErr(w, r, "Listing the batch's members", err)
		return
	}
	self := url.PathEscape(id)
	d := batchData{Batch: h.batchRow(r, b), State: state}
	for _, t := range []struct {
		s driver.BatchMemberState
		n int
	}{{"", b.Total}, {driver.MemberPending, b.Pending}, {driver.MemberDone, b.Done}, {driver.MemberFailed, b.Failed}, {driver.MemberCancelled, b.Cancelled}} {
		u, label := self, "all"
		if t.s != "" {
			u, label = self+"?"+url.Values{"state": {string(t.s)}}.Encode(), string(t.s)
		}
		d.Tabs = append(d.Tabs, memberTab{Label: label, URL: u, Active: t.s == state, N: t.n})
	}
	detail := h.src.Abilities().Detail
	for _, m := range page.Members {
		row := memberRow{BatchMember: m}
		if detail {
			row.URL = "../jobs/" + url.PathEscape(m.JobID)
		}
		d.Members = append(d.Members, row)
	}
	filters := url.Values{}
	if state != "" {
		filters.Set("state", string(state))
	}
	d.pager = keysetPager(self, filters, ref, page.Next)
	if b.CancelledAt.IsZero() && !b.Finished() {
		d.CancelURL = self + "/cancel"
	}
	if b.Failed > 0 {
		d.RetryURL = self + "/retry"
	}
	title := "Batch " + shortID(b.ID)
	if b.Name != "" {
		title = "Batch " + b.Name
	}
	h.render(w, r, http.StatusOK, "batch", h.newPage(w, r, title, "batches", d))
}

// cancelBatch cancels a batch and goes back to its page with the number
// of members the cancel stopped.
func (h *handler) cancelBatch(w http.ResponseWriter, r *http.Request) {
	bs := h.batchesOf()
	if bs == nil {
		h.failErr(w, r, "Cancelling the batch", queue.ErrUnsupported)
		return
	}
	id := r.PathValue("id")
	before, err := bs.GetBatch(r.Context(), id)
	if err == nil {
		var after driver.BatchInfo
		after, err = bs.CancelBatch(r.Context(), id)
		if err == nil {
			back(w, r, "batches/"+url.PathEscape(id), "cancelled", after.Cancelled-before.Cancelled, false)
			return
		}
	}
	h.failErr(w, r, "Cancelling the batch", err)
}

// retryBatch retries up to maxBulk of a batch's failed members.
func (h *handler) retryBatch(w http.ResponseWriter, r *http.Request) {
	bs := h.batchesOf()
	if bs == nil {
		h.failErr(w, r, "Retrying the batch's failed members", queue.ErrUnsupported)
		return
	}
	id := r.PathValue("id")
	n, more, err := bs.RetryFailedMembers(r.Context(), id, maxBulk)
	if err != nil {
		h.failErr(w, r, "Retrying the batch's failed members (after "+strconv.Itoa(n)+")", err)
		return
	}
	flash := "retried"
	switch {
	case more:
		flash = "more"
	case n == 0:
		flash = "none"
	}
	back(w, r, "batches/"+url.PathEscape(id), flash, n, false)
}

// apiBatch is a batch in api/batches.
type apiBatch struct {
	ID            string    `json:"id"`
	Name          string    `json:"name,omitempty"`
	AllowFailures bool      `json:"allow_failures"`
	Total         int       `json:"total"`
	Pending       int       `json:"pending"`
	Done          int       `json:"done"`
	Failed        int       `json:"failed"`
	Cancelled     int       `json:"cancelled"`
	Progress      int       `json:"progress"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
	CancelledAt   time.Time `json:"cancelled_at,omitzero"`
	ThenAt        time.Time `json:"then_at,omitzero"`
	CatchAt       time.Time `json:"catch_at,omitzero"`
	FinishedAt    time.Time `json:"finished_at,omitzero"`
}

func apiBatchOf(b driver.BatchInfo) apiBatch {
	return apiBatch{ID: b.ID, Name: b.Name, AllowFailures: b.AllowFailures, Total: b.Total, Pending: b.Pending,
		Done: b.Done, Failed: b.Failed, Cancelled: b.Cancelled, Progress: b.Progress(), CreatedAt: utc(b.CreatedAt),
		CancelledAt: utc(b.CancelledAt), ThenAt: utc(b.ThenAt), CatchAt: utc(b.CatchAt), FinishedAt: utc(b.FinishedAt)}
}

type apiBatches struct {
	Batches []apiBatch `json:"batches"`
	Next    string     `json:"next,omitempty"`
}

type apiMember struct {
	JobID string `json:"job_id"`
	State string `json:"state"`
}

type apiBatchDetail struct {
	apiBatch
	Members []apiMember `json:"members"`
	Next    string      `json:"next,omitempty"`
}

// apiBatchList serves GET api/batches?after=: a page of batches.
func (h *handler) apiBatchList(w http.ResponseWriter, r *http.Request) {
	bs := h.batchesOf()
	if bs == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	page, err := bs.ListBatches(r.Context(), driver.BatchFilter{Limit: PageSize, After: clip(r.URL.Query().Get("after"))})
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	out := apiBatches{Batches: make([]apiBatch, len(page.Batches)), Next: page.Next}
	for i, b := range page.Batches {
		out.Batches[i] = apiBatchOf(b)
	}
	writeJSON(w, out)
}

// apiBatchOne serves GET api/batches/{id}?state=&after=: a batch and a
// page of its members.
func (h *handler) apiBatchOne(w http.ResponseWriter, r *http.Request) {
	bs := h.batchesOf()
	if bs == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	id := r.PathValue("id")
	b, err := bs.GetBatch(r.Context(), id)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	q := r.URL.Query()
	f := driver.MemberFilter{State: driver.BatchMemberState(q.Get("state")), After: clip(q.Get("after")), Limit: PageSize}
	switch f.State {
	case "", driver.MemberPending, driver.MemberDone, driver.MemberFailed, driver.MemberCancelled:
	default:
		h.apiStatus(w, http.StatusBadRequest, "state must be pending, done, failed or cancelled")
		return
	}
	page, err := bs.BatchMembers(r.Context(), id, f)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	out := apiBatchDetail{apiBatch: apiBatchOf(b), Members: make([]apiMember, len(page.Members)), Next: page.Next}
	for i, m := range page.Members {
		out.Members[i] = apiMember{JobID: m.JobID, State: string(m.State)}
	}
	writeJSON(w, out)
}

// apiBatchCancel serves POST api/batches/{id}/cancel: the batch after the
// cancel.
func (h *handler) apiBatchCancel(w http.ResponseWriter, r *http.Request) {
	bs := h.batchesOf()
	if bs == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	b, err := bs.CancelBatch(r.Context(), r.PathValue("id"))
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	writeJSON(w, apiBatchOf(b))
}

// apiBatchRetry serves POST api/batches/{id}/retry: how many failed
// members were retried, and whether more remain (call again).
func (h *handler) apiBatchRetry(w http.ResponseWriter, r *http.Request) {
	bs := h.batchesOf()
	if bs == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	id := r.PathValue("id")
	if _, err := bs.GetBatch(r.Context(), id); err != nil {
		h.apiError(w, r, err)
		return
	}
	n, more, err := bs.RetryFailedMembers(r.Context(), id, maxBulk)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	writeJSON(w, struct {
		Retried int  `json:"retried"`
		More    bool `json:"more"`
	}{n, more})
}

// batchRoutes adds the batches pages, actions and API to m.
func (h *handler) batchRoutes(m *router) {
	m.HandleFunc("GET /queues/batches", h.batchesPage)
	m.HandleFunc("GET /queues/batches/{id}", h.batchPage)
	m.HandleFunc("POST /queues/batches/{id}/cancel", h.cancelBatch)
	m.HandleFunc("POST /queues/batches/{id}/retry", h.retryBatch)
	m.HandleFunc("GET /queues/api/batches", h.apiBatchList)
	m.HandleFunc("GET /queues/api/batches/{id}", h.apiBatchOne)
	m.HandleFunc("POST /queues/api/batches/{id}/cancel", h.apiBatchCancel)
	m.HandleFunc("POST /queues/api/batches/{id}/retry", h.apiBatchRetry)
}
