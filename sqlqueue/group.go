package sqlqueue

import (
	"context"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// GatherGroups turns the due groups of the jobs named name in queues into
// sets (see queue.Grouper). One transaction reads the grouped rows
// (locked, so a concurrent gather skips them), decides in Go which groups
// are due under rule, deletes their members and inserts each set through
// the push's own insert, so a set is stored exactly like a pushed job.
func (q *Queue) GatherGroups(ctx context.Context, queues []string, name string, rule queue.GroupRule) (int, error) {
	if err := q.use(ctx); err != nil {
		return 0, err
	}
	if len(queues) == 0 {
		queues = []string{queue.DefaultQueue}
	}
	var sets int
	err := q.againOnConflict(ctx, func() error {
		sets = 0
		return q.d.writeTx(ctx, q, func(ex execer) error {
			st := stmts(ex)
			query, args, err := q.stmtIn(qGroupedOf, queues, name)
			if err != nil {
				return err
			}
			rows, err := q.scanRows(ctx, st, query, args)
			if err != nil {
				return err
			}
			now := time.Now()
			for _, members := range groupsOf(rows) {
				for len(members) > 0 && rule.Due(len(members), members[0].CreatedAt, members[len(members)-1].CreatedAt, now) {
					take := members[:min(len(members), rule.MaxSize)]
					members = members[len(take):]
					if err := q.storeSet(ctx, st, take, now); err != nil {
						return err
					}
					sets++
				}
			}
			return nil
		})
	})
	if err != nil {
		return 0, q.wrap(ctx, err, "gathering the groups of %s", name)
	}
	if sets > 0 {
		q.wake.at(time.Now())
	}
	return sets, nil
}

// groupsOf splits grouped rows (oldest first) by queue and group key,
// each group oldest first, in the order of their oldest member.
func groupsOf(rows []row) [][]queue.Job {
	type gk struct{ queue, key string }
	at := make(map[gk]int)
	var out [][]queue.Job
	for _, r := range rows {
		k := gk{r.job.QueueName(), queue.GroupKeyOf(r.job)}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r.job)
	}
	return out
}

// storeSet deletes members (one group, oldest first) and stores their set
// in their place, on st inside the gather's transaction.
func (q *Queue) storeSet(ctx context.Context, st statements, members []queue.Job, now time.Time) error {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	query, args, err := q.stmtIn(qDeleteInState, ids, stateGrouped)
	if err != nil {
		return err
	}
	if _, err := st.Exec(ctx, query, args...); err != nil {
		return err
	}
	_, err = q.pushFree(ctx, st, true, []queue.Job{queue.GroupSet(members, now)}, []bool{false}, now)
	return err
}
