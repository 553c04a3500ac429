package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Held sequences (queue.Sequence): a member dead-lettered without
// driver.ReleaseOnDead holds its sequence, and nothing after it runs until
// an operator releases it. The Sequences page lists the held sequences
// with a Release button each; api/sequences does the same for scripts.
// A release is recorded in the dead job's history, with who released it.

// SequenceSource is a Source that keeps sequences: the Sequences page and
// api/sequences. The handler offers them when the Source is a
// SequenceSource and its Abilities().Sequences is set. ForQueue's Source
// is one; it works when its driver has driver.Sequencer.
type SequenceSource interface {
	// HeldSequences lists up to limit sequences of queue ("" for every
	// queue) held by a dead head, most recently dead first
	// (driver.Sequencer's rules).
	HeldSequences(ctx context.Context, queue string, limit int) ([]driver.SequenceInfo, error)
	// ReleaseSequence releases the sequence key of queue held by its dead
	// head: the next member becomes ready. It fails with an error
	// wrapping ErrNotFound when no dead head holds the sequence.
	ReleaseSequence(ctx context.Context, queue, key string) error
}

// sequencer returns the driver's Sequencer, or an error wrapping
// queue.ErrUnsupported.
func (qi *QueueInspector) sequencer(doing string) (driver.Sequencer, error) {
	if qi.seq == nil {
		return nil, fmt.Errorf("dashboard: %s: %w", doing, queue.ErrUnsupported)
	}
	return qi.seq, nil
}

// HeldSequences lists the driver's held sequences (see SequenceSource).
func (qi *QueueInspector) HeldSequences(ctx context.Context, queueName string, limit int) ([]driver.SequenceInfo, error) {
	s, err := qi.sequencer("listing the held sequences")
	if err != nil {
		return nil, err
	}
	return s.HeldSequences(ctx, queueName, limit)
}

// ReleaseSequence releases a held sequence (see SequenceSource).
func (qi *QueueInspector) ReleaseSequence(ctx context.Context, queueName, key string) error {
	s, err := qi.sequencer("releasing a sequence")
	if err != nil {
		return err
	}
	defer qi.changed()
	return s.ReleaseSequence(ctx, queueName, key)
}

// sequencesOf returns the handler's SequenceSource, or nil when it keeps
// no sequences.
func (h *handler) sequencesOf() SequenceSource {
	ss, ok := h.src.(SequenceSource)
	if !ok || !h.src.Abilities().Sequences {
		return nil
	}
	return ss
}

// errNotHeld says a release found no dead head holding the sequence.
const errNotHeld = "the sequence is not held by a dead job: it was released already, its dead job was retried or deleted, or there is no such sequence"

// releaseSequence releases the sequence key of queueName for the request
// and records the release in the dead head's history (when the Source
// changes jobs, Abilities().Amend), with who released it. It returns the
// sequence as it was listed before the release, Head.ID "" when it was
// not among the first driver.DefaultHeldSequences listed (then nothing is
// recorded but the log line).
func (h *handler) releaseSequence(ctx context.Context, r *http.Request, ss SequenceSource, queueName, key string) (driver.SequenceInfo, error) {
	held := driver.SequenceInfo{Queue: queueName, Key: key}
	list, err := ss.HeldSequences(ctx, queueName, driver.DefaultHeldSequences)
	if err != nil {
		return held, err
	}
	for _, s := range list {
		if s.Queue == queueName && s.Key == key {
			held = s
			break
		}
	}
	if err := ss.ReleaseSequence(ctx, queueName, key); err != nil {
		return held, err
	}
	note(r, slog.String("queue", queueName), slog.String("sequence", key), slog.String("job", held.Head.ID))
	if as, ok := h.amender(); ok && held.Head.ID != "" {
		what := fmt.Sprintf("released its sequence %s (%d waiting behind it)", strconv.Quote(key), held.Waiting)
		_, err := as.AmendJob(ctx, held.Head.ID, driver.Amendment{Op: driver.AmendNote, Action: driver.Action{By: actorName(ctx), What: what}})
		if err != nil && !isNotFound(err) {
			h.cfg.logger.Warn("dashboard: noting a release on the dead job", "job", held.Head.ID, "queue", queueName, "sequence", key, "err", err)
		}
	}
	return held, nil
}

type sequencesData struct {
	// Supported is false when the store keeps no sequences: the page
	// says so.
	Supported bool
	Controls  bool
	Queue     string // the ?queue= filter, "" for every queue
	Rows      []sequenceRow
	// Limit is how many held sequences the page lists at most; Full is
	// set when it lists that many.
	Limit int
	Full  bool
	// AllURL lists every queue's when the page is filtered.
	AllURL     string
	ReleaseURL string
}

type sequenceRow struct {
	driver.SequenceInfo
	QueueURL string
	JobURL   string // the dead job's page, "" without job detail
	// DeadAt is when the head was dead-lettered.
	DeadAt time.Time
}

// sequencesPage serves GET sequences (?queue=): the sequences held by a
// dead job, most recently dead first, each with its Release button.
func (h *handler) sequencesPage(w http.ResponseWriter, r *http.Request) {
	base := relBase(r)
	qname := clip(r.URL.Query().Get("queue"))
	d := sequencesData{Controls: canAct(r), Queue: qname, Limit: driver.DefaultHeldSequences, ReleaseURL: base + "sequences/release"}
	if qname != "" {
		d.AllURL = base + "sequences"
	}
	title := "Held sequences"
	if qname != "" {
		title += " of " + qname
	}
	ss := h.sequencesOf()
	if ss == nil {
		h.render(w, r, http.StatusOK, "sequences", h.newPage(w, r, title, "sequences", d))
		return
	}
	d.Supported = true
	list, err := ss.HeldSequences(r.Context(), qname, d.Limit)
	if err != nil {
		h.failErr(w, r, "Listing the held sequences", err)
		return
	}
	d.Full = len(list) >= d.Limit
	detail := h.src.Abilities().Detail
	for _, s := range list {
		row := sequenceRow{SequenceInfo: s, QueueURL: base + "queue/" + url.PathEscape(s.Queue), DeadAt: s.Head.FinishedAt}
		if row.DeadAt.IsZero() {
			row.DeadAt = s.Head.UpdatedAt
		}
		if detail && s.Head.ID != "" {
			row.JobURL = base + "jobs/" + url.PathEscape(s.Head.ID)
		}
		d.Rows = append(d.Rows, row)
	}
	h.render(w, r, http.StatusOK, "sequences", h.newPage(w, r, title, "sequences", d))
}

// releaseAction serves POST sequences/release (the form's queue and key:
// keys may hold slashes, so they are no path segment) and goes back to
// the page it came from.
func (h *handler) releaseAction(w http.ResponseWriter, r *http.Request) {
	ss := h.sequencesOf()
	if ss == nil {
		h.failErr(w, r, "Releasing the sequence", queue.ErrUnsupported)
		return
	}
	qname, key := r.PostFormValue("queue"), r.PostFormValue("key")
	if qname == "" || key == "" {
		h.fail(w, r, http.StatusBadRequest, "Releasing the sequence: the form names no queue or no key.", nil)
		return
	}
	_, err := h.releaseSequence(r.Context(), r, ss, qname, key)
	switch {
	case isNotFound(err):
		back(w, r, "sequences", "notheld", -1, false)
	case err != nil:
		h.failErr(w, r, "Releasing the sequence", err)
	default:
		back(w, r, "sequences", "released", -1, false)
	}
}

type apiSequences struct {
	Queue     string        `json:"queue,omitempty"`
	Sequences []apiSequence `json:"sequences"`
	Limit     int           `json:"limit"`
}

type apiSequence struct {
	Queue   string `json:"queue"`
	Key     string `json:"key"`
	Waiting int    `json:"waiting"`
	// DeadAt is when the head was dead-lettered.
	DeadAt time.Time `json:"dead_at"`
	Head   apiJob    `json:"head"`
}

func toAPISequence(s driver.SequenceInfo) apiSequence {
	at := s.Head.FinishedAt
	if at.IsZero() {
		at = s.Head.UpdatedAt
	}
	return apiSequence{Queue: s.Queue, Key: s.Key, Waiting: s.Waiting, DeadAt: utc(at), Head: toAPIJob(hide(s.Head))}
}

// apiSequencesList serves GET api/sequences?queue=: the held sequences,
// most recently dead first, at most driver.DefaultHeldSequences.
func (h *handler) apiSequencesList(w http.ResponseWriter, r *http.Request) {
	for k := range r.URL.Query() {
		if k != "queue" {
			h.apiStatus(w, http.StatusBadRequest, "unknown query parameter "+strconv.Quote(k)+": api/sequences takes queue")
			return
		}
	}
	ss := h.sequencesOf()
	if ss == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	qname := clip(r.URL.Query().Get("queue"))
	list, err := ss.HeldSequences(r.Context(), qname, driver.DefaultHeldSequences)
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	out := apiSequences{Queue: qname, Sequences: make([]apiSequence, len(list)), Limit: driver.DefaultHeldSequences}
	for i, s := range list {
		out.Sequences[i] = toAPISequence(s)
	}
	writeJSON(w, out)
}

// apiReleaseResult is the answer of POST api/sequences/release.
type apiReleaseResult struct {
	Queue    string `json:"queue"`
	Key      string `json:"key"`
	Released bool   `json:"released"`
	// Waiting is how many members waited behind the dead job when it was
	// listed, before the release (left out when it was not listed).
	Waiting *int `json:"waiting,omitempty"`
	// Head is the dead job that held the sequence, as it is afterwards
	// (when the Source reads jobs by id).
	Head *apiJob `json:"head,omitempty"`
}

// apiRelease serves POST api/sequences/release with the body {"queue":
// name, "key": key}: the sequence released, as the page's button does.
func (h *handler) apiRelease(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Queue string `json:"queue"`
		Key   string `json:"key"`
	}
	if !h.readBody(w, r, &in) {
		return
	}
	if in.Queue == "" || in.Key == "" {
		h.apiStatus(w, http.StatusBadRequest, `the body names the sequence: {"queue": name, "key": key}`)
		return
	}
	ss := h.sequencesOf()
	if ss == nil {
		h.apiError(w, r, queue.ErrUnsupported)
		return
	}
	held, err := h.releaseSequence(r.Context(), r, ss, in.Queue, in.Key)
	switch {
	case isNotFound(err):
		h.apiStatus(w, http.StatusNotFound, errNotHeld)
		return
	case err != nil:
		h.apiError(w, r, err)
		return
	}
	out := apiReleaseResult{Queue: in.Queue, Key: in.Key, Released: true}
	if held.Head.ID != "" {
		out.Waiting = &held.Waiting
		if out.Head, err = h.current(r.Context(), held.Head.ID); err != nil {
			h.apiError(w, r, err)
			return
		}
	}
	writeJSON(w, out)
}

// sequenceRoutes adds the Sequences page, its action and their API to m.
func (h *handler) sequenceRoutes(m *router) {
	m.HandleFunc("GET /queues/sequences", h.sequencesPage)
	m.HandleFunc("POST /queues/sequences/release", h.releaseAction)
	m.HandleFunc("GET /queues/api/sequences", h.apiSequencesList)
	m.HandleFunc("POST /queues/api/sequences/release", h.apiRelease)
}
