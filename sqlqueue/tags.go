package sqlqueue

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Monitored tags (queue.TagMonitor): the tags in <table>_tags, their jobs'
// records in <table>_tag_jobs, two lists per tag (recentList, failedList),
// each trimmed to queue.MaxTaggedJobs records whenever records are added.
// The jobs table is not read or changed: the Worker hands the records in.

// The lists of a monitored tag's records.
const (
	recentList = 0
	failedList = 1
)

// MonitorTag starts monitoring tag (see queue.TagMonitor).
func (q *Queue) MonitorTag(ctx context.Context, tag string) error {
	if err := queue.CheckTag(tag); err != nil {
		return fmt.Errorf("sqlqueue: monitoring tag %q: %w", tag, err)
	}
	if err := q.use(ctx); err != nil {
		return err
	}
	n, err := stmts(q.db).Exec(ctx, q.stmt(qTagMonitor), tag, micros(time.Now()), queue.MaxMonitoredTags)
	if err == nil && n == 0 {
		// Monitored already, or the bound is reached.
		var found int
		err = queryRow(ctx, stmts(q.db), q.stmt(qTagExists), []any{tag}, &found)
		if err == nil && found == 0 {
			return fmt.Errorf("sqlqueue: monitoring tag %q: %w", tag, queue.ErrTooManyTags)
		}
	}
	return q.wrap(ctx, err, "monitoring tag %q", tag)
}

// UnmonitorTag stops monitoring tag and deletes its records.
func (q *Queue) UnmonitorTag(ctx context.Context, tag string) error {
	if err := q.use(ctx); err != nil {
		return err
	}
	err := q.d.writeTx(ctx, q, func(ex execer) error {
		if _, err := ex.ExecContext(ctx, q.stmt(qTagUnmonitor), tag); err != nil {
			return err
		}
		_, err := ex.ExecContext(ctx, q.stmt(qTagDropJobs), tag)
		return err
	})
	return q.wrap(ctx, err, "unmonitoring tag %q", tag)
}

// MonitoredTags lists the monitored tags, sorted.
func (q *Queue) MonitoredTags(ctx context.Context) ([]string, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	rows, err := q.db.QueryContext(ctx, q.stmt(qTagList))
	if err != nil {
		return nil, q.wrap(ctx, err, "listing the monitored tags")
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var tag string
		if err := rows.Scan(&tag); err != nil {
			return nil, q.wrap(ctx, err, "listing the monitored tags")
		}
		out = append(out, tag)
	}
	return out, q.wrap(ctx, rows.Err(), "listing the monitored tags")
}

// RecordTagged records jobs under their tags, when monitored, in one
// write transaction, and trims the lists it added to.
func (q *Queue) RecordTagged(ctx context.Context, jobs []queue.TaggedJob) error {
	if len(jobs) == 0 {
		return nil
	}
	if err := q.use(ctx); err != nil {
		return err
	}
	type list struct {
		tag  string
		list int
	}
	err := q.againOnConflict(ctx, func() error {
		return q.d.writeTx(ctx, q, func(ex execer) error {
			touched := make(map[list]bool)
			rec := q.stmt(qTagRecord)
			for _, j := range jobs {
				lists := []int{recentList}
				if j.State == queue.StateDead {
					lists = append(lists, failedList)
				}
				for _, l := range lists {
					if _, err := ex.ExecContext(ctx, rec, j.Tag, l, j.ID, j.Queue, j.Name, string(j.State),
						micros(j.At), j.Attempts, j.Error, j.Tag); err != nil {
						return err
					}
					touched[list{j.Tag, l}] = true
				}
			}
			for l := range touched {
				var at int64
				var id string
				err := queryRow(ctx, stmts(ex), q.stmt(qTagCutoff), []any{l.tag, l.list, queue.MaxTaggedJobs}, &at, &id)
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				if err != nil {
					return err
				}
				if _, err := ex.ExecContext(ctx, q.stmt(qTagTrim), l.tag, l.list, at, at, id); err != nil {
					return err
				}
			}
			return nil
		})
	})
	return q.wrap(ctx, err, "recording %d jobs of monitored tags", len(jobs))
}

// TaggedJobs returns tag's records, newest first.
func (q *Queue) TaggedJobs(ctx context.Context, tag string, failed bool) ([]queue.TaggedJob, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	l := recentList
	if failed {
		l = failedList
	}
	rows, err := q.db.QueryContext(ctx, q.stmt(qTagJobs), tag, l, queue.MaxTaggedJobs)
	if err != nil {
		return nil, q.wrap(ctx, err, "reading the jobs of tag %q", tag)
	}
	defer func() { _ = rows.Close() }()
	var out []queue.TaggedJob
	for rows.Next() {
		j := queue.TaggedJob{Tag: tag}
		var at int64
		var state string
		if err := rows.Scan(&j.ID, &j.Queue, &j.Name, &state, &at, &j.Attempts, &j.Error); err != nil {
			return nil, q.wrap(ctx, err, "reading the jobs of tag %q", tag)
		}
		j.State, j.At = queue.JobState(state), fromMicros(at)
		out = append(out, j)
	}
	return out, q.wrap(ctx, cmp.Or(rows.Err(), ctx.Err()), "reading the jobs of tag %q", tag)
}
