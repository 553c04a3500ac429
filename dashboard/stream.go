package dashboard

import (
	"errors"
	"net/http"
)

// streamList writes the page of a list that searches (q.Search) as the
// search goes: the page's open part, the table's head and the rows of
// the search's first call (first) at once, then each further window's
// rows as searchOn reads them, each flushed to the client, then the
// table's close part (where the search stopped, the pager) and the
// page's. It renders the templates render does, in the same order, so
// the page is the one render would write for the same result.
//
// A store error before anything was written is the caller's to answer
// (the ordinary error page); once the status line has gone out, a store
// error ends the search with a row of the table that says why, and the
// page is closed as usual. When the client goes away (the request's
// context is done), the search stops and nothing more is written.
//
// rows turns jobs into table rows; end fills in what the page says once
// the search is over, given where it ended and the error that stopped
// it.
func (h *handler) streamList(w http.ResponseWriter, r *http.Request, q ListQuery, title, nav string, d *jobsData,
	first JobList, rows func([]JobView) []jobRow, end func(JobList, error)) {
	ctx := r.Context()
	d.Rows = rows(first.Jobs)
	d.Found = len(d.Rows) > 0
	p := h.newPage(w, r, title, nav, *d)
	s := &pageStream{h: h, w: w, name: "jobs", p: p}
	if err := s.write("layout-open", "jobs-open", "jobs-rows"); err != nil {
		return
	}
	last, err := h.searchOn(ctx, q, first, func(more JobList) error {
		d.Rows = rows(more.Jobs)
		d.Found = d.Found || len(d.Rows) > 0
		p.Data = *d
		return s.write("jobs-rows")
	})
	if ctx.Err() != nil || s.err != nil {
		// No one reads the rest.
		return
	}
	d.Rows = nil
	end(last, err)
	p.Data = *d
	_ = s.write("jobs-close", "layout-close")
}

// pageStream writes a page's parts as they are ready, each flushed to
// the client.
type pageStream struct {
	h    *handler
	w    http.ResponseWriter
	name string // the page, a key of handler.pages
	p    *page
	// started: the status line and headers have gone out.
	started bool
	// err ended the stream: a part that did not render, or a write the
	// client did not take. Nothing more is written after it.
	err error
}

// write renders the templates tmpls with s.p, writes what they wrote and
// flushes it. The first write sends the headers: render's, and
// X-Accel-Buffering: no, which asks a proxy (nginx) to pass the parts on
// as they come rather than hold the page. A part that does not render
// before anything was written answers 500 as render does; after, the
// page ends there (the error is logged).
func (s *pageStream) write(tmpls ...string) error {
	if s.err != nil {
		return s.err
	}
	b, ok := s.h.renderParts(s.name, s.p, tmpls...)
	if !ok {
		s.err = errors.New("dashboard: rendering failed")
		if !s.started {
			http.Error(s.w, s.err.Error(), http.StatusInternalServerError)
		}
		return s.err
	}
	if !s.started {
		s.started = true
		s.w.Header().Set("X-Accel-Buffering", "no")
		writeHead(s.w, http.StatusOK)
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	if err := http.NewResponseController(s.w).Flush(); err != nil {
		s.err = err
		return err
	}
	return nil
}

// canFlush reports whether w, or a ResponseWriter it wraps (Unwrap, as
// http.ResponseController follows), can flush: whether a page written in
// parts reaches the client part by part.
func canFlush(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case http.Flusher:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// stoppedText is the row that ends a search the store stopped after the
// page began. The store's error is logged, not shown, as on every page
// (see fail): its text can name tables, hosts and statements.
const stoppedText = "The search stopped here: the store failed; the server log has the details. " +
	"The rows above are what it had found; the next page goes on from where it stopped."
