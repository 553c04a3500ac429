package memqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// ActOn applies a to at most limit jobs matching f (see driver.Controller),
// a page of ListJobs at a time. In memory there is no statement to save:
// each job is changed by the call that changes one, under the lock.
func (q *Queue) ActOn(ctx context.Context, f driver.JobFilter, a driver.BulkAction, limit int, rec driver.Action) (int, error) {
	if err := driver.CheckBulk(a, f.State, limit); err != nil {
		return 0, err
	}
	f.After, f.Scan = "", 0
	total := 0
	for total < limit {
		f.Limit = min(maxPageSize, limit-total)
		page, err := q.ListJobs(ctx, f)
		if err != nil {
			return total, err
		}
		for _, j := range page.Jobs {
			switch {
			case a == driver.BulkRetry && rec.What != "":
				_, err = q.Amend(ctx, j.ID, driver.Amendment{Op: driver.AmendRetry, Action: rec, From: queue.StateDead})
			case a == driver.BulkRetry:
				err = q.RetryDead(ctx, j.ID)
			case a == driver.BulkForget:
				err = q.ForgetDead(ctx, j.ID)
			case a == driver.BulkCancel:
				_, err = q.Cancel(ctx, j.ID)
			}
			switch {
			case err == nil:
				total++
			case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrFinished), errors.Is(err, queue.ErrDuplicate), errors.Is(err, driver.ErrJobState):
			default:
				return total, fmt.Errorf("memqueue: bulk %s of %s jobs: %w", a, f.State, err)
			}
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	return total, nil
}

// CountJobs counts the jobs matching f, exact up to limit (see
// driver.Controller). A search examines every job.
func (q *Queue) CountJobs(ctx context.Context, f driver.JobFilter, limit int) (driver.Count, error) {
	if limit < 1 {
		return driver.Count{}, fmt.Errorf("memqueue: counting jobs with limit %d: %w", limit, queue.ErrBulkState)
	}
	f.After, f.Scan = "", 0
	var n int64
	for {
		f.Limit = maxPageSize
		page, err := q.ListJobs(ctx, f)
		if err != nil {
			return driver.Count{}, err
		}
		n += int64(len(page.Jobs))
		if n > int64(limit) {
			return driver.Count{N: int64(limit), More: true}, nil
		}
		if page.Next == "" {
			return driver.Count{N: n}, nil
		}
		f.After = page.Next
	}
}
