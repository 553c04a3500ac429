package memqueue

import (
	"context"
	"fmt"
	"slices"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// group holds the members of one group (one name and group key of one
// queue), oldest first.
type group struct {
	name, key string
	members   []*entry
}

// groupID is the key of a group in namedQueue.groups.
func groupID(name, key string) string { return name + "\x00" + key }

// groupLocked keeps e, a new member, in StateGrouped in its group.
func (q *Queue) groupLocked(e *entry) {
	nq := e.nq
	if nq.groups == nil {
		nq.groups = make(map[string]*group)
	}
	key := driver.GroupKeyOf(e.job)
	id := groupID(e.job.Name, key)
	g := nq.groups[id]
	if g == nil {
		g = &group{name: e.job.Name, key: key}
		nq.groups[id] = g
	}
	e.state = driver.StateGrouped
	g.members = append(g.members, e)
}

// ungroupLocked takes the member e out of its group (cancelled or purged).
func (nq *namedQueue) ungroupLocked(e *entry) {
	id := groupID(e.job.Name, driver.GroupKeyOf(e.job))
	g := nq.groups[id]
	if g == nil {
		return
	}
	g.members = slices.DeleteFunc(g.members, func(m *entry) bool { return m == e })
	if len(g.members) == 0 {
		delete(nq.groups, id)
	}
}

// grouped returns how many members wait in nq's groups.
func (nq *namedQueue) grouped() int {
	n := 0
	for _, g := range nq.groups {
		n += len(g.members)
	}
	return n
}

// GatherGroups turns every due group of the jobs named name in queues into
// sets (see driver.Grouper), in one critical section.
func (q *Queue) GatherGroups(ctx context.Context, queues []string, name string, rule driver.GroupRule) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memqueue: gathering groups of %s: %w", name, err)
	}
	if len(queues) == 0 {
		queues = defaultQueues
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	sets := 0
	for _, qn := range queues {
		nq := q.queues[qn]
		if nq == nil {
			continue
		}
		for id, g := range nq.groups {
			if g.name != name {
				continue
			}
			for len(g.members) > 0 && rule.Due(len(g.members), g.members[0].job.CreatedAt, g.members[len(g.members)-1].job.CreatedAt, now) {
				k := min(len(g.members), rule.MaxSize)
				jobs := make([]queue.Job, k)
				for i, m := range g.members[:k] {
					jobs[i] = m.job
					delete(q.jobs, m.job.ID)
					m.state = ""
				}
				g.members = slices.Delete(g.members, 0, k)
				set := driver.GroupSet(jobs, now)
				q.seq++
				e := &entry{job: set, seq: q.seq, avail: nanos(set.AvailableAt), nq: nq, updatedAt: now}
				q.jobs[set.ID] = e
				q.enqueueLocked(e, now.UnixNano())
				sets++
			}
			if len(g.members) == 0 {
				delete(nq.groups, id)
			}
		}
	}
	return sets, nil
}

var _ driver.Grouper = (*Queue)(nil)
