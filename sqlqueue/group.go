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
			hidden, err := q.hiddenGrouped(ctx, st, queues, name, rows)
			if err != nil {
				return err
			}
			now := time.Now()
			for _, g := range groupsOf(rows) {
				members, seqs := g.jobs, g.seqs
				bound, partial := hidden[members[0].QueueName()]
				for len(members) > 0 && rule.Due(len(members), members[0].CreatedAt, members[len(members)-1].CreatedAt, now) {
					n := min(len(members), rule.MaxSize)
					if partial && (n < rule.MaxSize || seqs[n-1] > bound) {
						// Another gather holds a member older than
						// this set's newest, or one that may belong
						// to this group and decide its timing: leave
						// the group to the next gather.
						break
					}
					take := members[:n]
					members, seqs = members[n:], seqs[n:]
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

// group is one group's members as a gather reads them, oldest first,
// with their seq.
type group struct {
	jobs []queue.Job
	seqs []int64
}

// groupsOf splits grouped rows (oldest first) by queue and group key,
// each group oldest first, in the order of their oldest member.
func groupsOf(rows []row) []group {
	type gk struct{ queue, key string }
	at := make(map[gk]int)
	var out []group
	for _, r := range rows {
		k := gk{r.job.QueueName(), queue.GroupKeyOf(r.job)}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, group{})
		}
		out[i].jobs = append(out[i].jobs, r.job)
		out[i].seqs = append(out[i].seqs, r.seq)
	}
	return out
}

// hiddenGrouped finds, for each queue, the oldest grouped row (its seq)
// that the gather's locked read did not return although it is older than
// a row it did: a row another gather holds locked (SKIP LOCKED passed
// over it), or one committed after the read began. Two gathers that
// interleave their scans each read a part of a group with gaps, and a set
// built across a gap would not hold the group's oldest members; the
// gather stores only full sets below the bound in such a queue. A queue
// without such a row is absent from the map. The read takes no lock, so
// it sees another gather's locked rows as still grouped.
func (q *Queue) hiddenGrouped(ctx context.Context, st statements, queues []string, name string, rows []row) (map[string]int64, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	seen := make(map[int64]bool, len(rows))
	var top int64
	for _, r := range rows {
		seen[r.seq] = true
		top = max(top, r.seq)
	}
	query, args, err := q.stmtIn(qGroupedSeqs, queues, name, top)
	if err != nil {
		return nil, err
	}
	rs, err := st.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var hidden map[string]int64
	for rs.Next() {
		var queueName string
		var seq int64
		if err := rs.Scan(&queueName, &seq); err != nil {
			return nil, err
		}
		if seen[seq] {
			continue
		}
		if hidden == nil {
			hidden = make(map[string]int64)
		}
		if b, ok := hidden[queueName]; !ok || seq < b {
			hidden[queueName] = seq
		}
	}
	return hidden, rs.Err()
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
