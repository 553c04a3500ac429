package dashboard

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// searchMargin is the part of a request's deadline a search that goes on
// by itself leaves for rendering the page.
const searchMargin = time.Second

// SearchBudget sets how long one request's payload search goes on by
// itself: a Source bounds each search call in rows and time (sqlqueue
// examines at most 10,000 jobs a call), and when a call stops at its
// bound before it filled the page, the handler asks for the rest from
// where it stopped, until the page is full, the jobs end or d has passed
// (and never past the request's deadline, RequestTimeout, less a second
// to render). So a match deep in a queue is found on the first page, not
// after hundreds of "Search the next N" clicks. When the budget runs out
// first, the page says how many jobs were examined and its Next link
// goes on from there: "no match" is never said of jobs not examined. The
// default is 5 seconds; zero or less asks the Source once per page.
func SearchBudget(d time.Duration) Option { return func(c *config) { c.searchBudget = d } }

// searchOn continues a payload search l of q that stopped at the
// Source's bound before it filled the page (see SearchBudget). A call
// that fails ends the search with what was found: Scanned and Next say
// where to go on.
func (h *handler) searchOn(ctx context.Context, q ListQuery, l JobList) JobList {
	if h.cfg.searchBudget <= 0 || !h.src.Abilities().Browse {
		return l
	}
	limit := q.Limit
	if limit <= 0 {
		limit = PageSize
	}
	end := time.Now().Add(h.cfg.searchBudget)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-searchMargin).Before(end) {
		end = dl.Add(-searchMargin)
	}
	total := l.Scanned
	for l.Scanned > 0 && l.Next != "" && len(l.Jobs) < limit && time.Now().Before(end) {
		next := q
		next.After, next.Limit = l.Next, limit-len(l.Jobs)
		cctx, cancel := context.WithDeadline(ctx, end)
		more, err := h.src.List(cctx, next)
		cancel()
		if err != nil {
			break
		}
		l.Jobs = append(l.Jobs, more.Jobs...)
		l.Next, l.Scanned = more.Next, more.Scanned
		total += more.Scanned
	}
	if l.Scanned > 0 {
		l.Scanned = total
	}
	return l
}

// checkSearch returns, for a payload search (q=) that starts as a field
// filter and does not parse, the error to show: where it went wrong and
// what was expected there (see driver.ParseSearch). Any other search is
// a substring, always valid.
func checkSearch(search string) error {
	if _, err := driver.ParseSearch(search); err != nil {
		return errors.New(searchMessage(err))
	}
	return nil
}

// searchMessage is the text of a driver.ErrBadSearch error err for the
// user: "bad search: at position 12: expected ...", without the store's
// prefixes.
func searchMessage(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, driver.ErrBadSearch.Error()); ok {
		return "bad search" + rest
	}
	return msg
}
