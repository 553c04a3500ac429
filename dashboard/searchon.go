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
// goes on from there: "no match" is never said of jobs not examined.
// The jobs and failed pages (and api/jobs in NDJSON) send each call's
// matches as it returns them, so the first ones show at once. The
// default is 5 seconds; zero or less asks the Source once per page.
func SearchBudget(d time.Duration) Option { return func(c *config) { c.searchBudget = d } }

// searchOn continues a payload search of q whose first call answered
// first, when that call stopped at the Source's bound before it filled
// the page (see SearchBudget). It asks for the search's windows one
// after the other and hands each window's answer to each as soon as it
// is read, so a page can send its rows while the search goes on
// (streamList); an error from each ends the search. It returns where the
// search ended: Next and Scanned, the jobs examined over every window,
// as the last answer gives them, and Jobs nil.
//
// It returns an error only for a call that failed while the request
// still wanted the answer and the budget had not run out: the search
// stopped there, and Next and Scanned say where to go on. A call cut by
// the budget ends the search as a bound does, and a request whose
// context is done (the client went away) ends it without an error: no
// one is left to tell.
func (h *handler) searchOn(ctx context.Context, q ListQuery, first JobList, each func(JobList) error) (JobList, error) {
	end := first
	end.Jobs = nil
	if h.cfg.searchBudget <= 0 || !h.src.Abilities().Browse {
		return end, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = PageSize
	}
	deadline := time.Now().Add(h.cfg.searchBudget)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-searchMargin).Before(deadline) {
		deadline = dl.Add(-searchMargin)
	}
	found, total := len(first.Jobs), first.Scanned
	for end.Scanned > 0 && end.Next != "" && found < limit && time.Now().Before(deadline) && ctx.Err() == nil {
		next := q
		next.After, next.Limit = end.Next, limit-found
		cctx, cancel := context.WithDeadline(ctx, deadline)
		more, err := h.src.List(cctx, next)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !time.Now().Before(deadline) && errors.Is(err, context.DeadlineExceeded) {
				break
			}
			end.Scanned = total
			return end, err
		}
		found += len(more.Jobs)
		end.Next, end.Scanned = more.Next, more.Scanned
		total += more.Scanned
		if err := each(more); err != nil {
			break
		}
	}
	if end.Scanned > 0 {
		end.Scanned = total
	}
	return end, nil
}

// searchAll is searchOn collecting the windows' jobs after first's: the
// whole page at once, for an answer that is not sent as it is found. The
// error is searchOn's: what was found before it is in the JobList.
func (h *handler) searchAll(ctx context.Context, q ListQuery, first JobList) (JobList, error) {
	jobs := first.Jobs
	end, err := h.searchOn(ctx, q, first, func(more JobList) error {
		jobs = append(jobs, more.Jobs...)
		return nil
	})
	end.Jobs = jobs
	end.NextPage = first.NextPage
	return end, err
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
