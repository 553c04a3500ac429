package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// BulkSource is a Source that acts on every job a list's filter selects
// in set-based statements, a chunk at a time, and counts them for the
// confirmation. ForQueue's Source is one when its driver has a
// driver.Controller. The "all matching" buttons use it when present, and
// otherwise act on the first 500 listed jobs one call each.
type BulkSource interface {
	// CountMatching counts the jobs q selects (its State and filters;
	// its cursor and page are ignored), exact up to limit. It fails with
	// an error wrapping queue.ErrUnsupported when the Source cannot.
	CountMatching(ctx context.Context, q ListQuery, limit int) (driver.Count, error)
	// ActOnMatching applies a to at most limit jobs q selects and
	// reports how many it changed (see driver.Controller.ActOn).
	ActOnMatching(ctx context.Context, q ListQuery, a driver.BulkAction, limit int) (int, error)
}

// bulkLimit is how many jobs one "all matching" click changes through a
// BulkSource, and how far the confirmation counts.
const bulkLimit = 10000

// filter is the driver's filter for the jobs q selects.
func (q ListQuery) filter() driver.JobFilter {
	return driver.JobFilter{State: q.State, Queue: q.Queue, Name: q.Name, Tag: q.Tag, Search: q.Search}
}

// CountMatching counts through the driver's driver.Controller.
func (qi *QueueInspector) CountMatching(ctx context.Context, q ListQuery, limit int) (driver.Count, error) {
	b := qi.ctl
	if b == nil {
		return driver.Count{}, fmt.Errorf("dashboard: counting matching jobs: %w", queue.ErrUnsupported)
	}
	return b.CountJobs(ctx, q.filter(), limit)
}

// ActOnMatching acts through the driver's driver.Controller and drops the
// shared reads. A retry is recorded in each job's history as done by who
// ctx names (IdentityOf).
func (qi *QueueInspector) ActOnMatching(ctx context.Context, q ListQuery, a driver.BulkAction, limit int) (int, error) {
	b := qi.ctl
	if b == nil {
		return 0, fmt.Errorf("dashboard: bulk %s: %w", a, queue.ErrUnsupported)
	}
	defer qi.changed()
	var rec driver.Action
	if a == driver.BulkRetry {
		rec = driver.Action{By: actorName(ctx), What: bulkRetried}
	}
	return b.ActOn(ctx, q.filter(), a, limit, rec)
}

// bulkRetried is what a job's history says of a retry of many jobs.
const bulkRetried = "retried (was dead) with others in one bulk retry"

// actOnMatching runs a on the jobs q selects through a BulkSource. ok is
// false when the Source has none, and the caller falls back to one call
// per listed job.
func (h *handler) actOnMatching(ctx context.Context, q ListQuery, a driver.BulkAction) (n int, more, ok bool, err error) {
	b, has := h.src.(BulkSource)
	if !has {
		return 0, false, false, nil
	}
	// Half the request's time: a big action on a slow store stops in
	// time to answer with how far it got (its chunks are committed one
	// by one), and the next click goes on.
	budget := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		budget = time.Until(dl) / 2
	}
	actx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	n, err = b.ActOnMatching(actx, q, a, bulkLimit)
	switch {
	case isUnsupported(err):
		return 0, false, false, nil
	case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return n, true, true, nil
	}
	return n, n >= bulkLimit, true, err
}

// confirmData is the model of the confirmation page of an "all matching"
// action.
type confirmData struct {
	Action driver.BulkAction
	Query  ListQuery
	Label  string // the state as the pages name it
	// Count is how many jobs match ("2,590"), "" when the Source cannot
	// count; More says there are more than bulkLimit, and Limit is how
	// many one click acts on.
	Count  string
	More   bool
	Limit  string
	Post   string // the form's action
	Do     string // the form's do value
	Back   string // the list, relative to this page
	Return string // the list, relative to the root: where the action returns
	Danger bool
}

// confirm shows how many jobs an "all matching" action would change and
// asks for the click that does it.
func (h *handler) confirm(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	a := driver.BulkAction(v.Get("do"))
	st := queue.StateDead
	if a == driver.BulkCancel {
		st = driver.JobState(v.Get("state"))
	}
	if !a.Valid(st) {
		h.fail(w, r, http.StatusBadRequest, "Only failed jobs can be retried or forgotten in bulk, and only ready, scheduled and running jobs cancelled.", nil)
		return
	}
	c := h.src.Abilities()
	if !c.Browse || a == driver.BulkCancel && !c.Cancel {
		h.fail(w, r, http.StatusNotFound, "Acting on every matching job needs a queue driver.", nil)
		return
	}
	if !canAct(r) {
		h.fail(w, r, http.StatusForbidden, "You may look at this dashboard but not act on jobs.", nil)
		return
	}
	q, _ := readQuery(r, st)
	q.After, q.Page = "", 0
	base := relBase(r)
	d := confirmData{Action: a, Query: q, Label: stateLabel(st), Danger: a != driver.BulkRetry, Limit: display.Int(maxBulk)}
	filters := q.values()
	if a == driver.BulkCancel {
		d.Post, d.Do = base+"jobs/bulk", "cancel-matching"
		filters.Set("state", string(st))
		d.Return = "jobs" + encodeQuery(filters)
	} else {
		d.Post, d.Do = base+"failed/bulk", string(a)+"-matching"
		d.Return = "failed" + encodeQuery(filters)
	}
	d.Back = base + d.Return
	if b, ok := h.src.(BulkSource); ok {
		n, err := b.CountMatching(r.Context(), q, bulkLimit)
		switch {
		case isUnsupported(err):
		case err != nil:
			h.failErr(w, r, "Counting the matching jobs", err)
			return
		default:
			d.Count, d.More, d.Limit = display.Int(n.N), n.More, display.Int(bulkLimit)
		}
	}
	title := map[driver.BulkAction]string{driver.BulkRetry: "Retry", driver.BulkForget: "Forget", driver.BulkCancel: "Cancel"}[a] +
		" every matching " + d.Label + " job?"
	nav := "jobs"
	if st == queue.StateDead {
		nav = "failed"
	}
	p := h.newPage(w, r, title, nav, d)
	p.Refresh = 0 // nothing on it changes by itself
	h.render(w, r, http.StatusOK, "confirm", p)
}

// confirmURL is the confirmation page of action a on the jobs q selects.
func confirmURL(base string, a driver.BulkAction, q ListQuery) string {
	v := q.values()
	v.Set("do", string(a))
	if a == driver.BulkCancel {
		v.Set("state", string(q.State))
	}
	return base + "confirm?" + v.Encode()
}
