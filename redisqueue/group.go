package redisqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// gatherCap is the most members one groupsDueScript call returns: the
// sets due beyond it are read by the next call of the same gather.
const gatherCap = 5000

// gatherRounds bounds the reads of one queue in one GatherGroups call,
// so that a gather racing others that take every set it reads ends.
const gatherRounds = 64

// GatherGroups turns the due groups of the jobs named name in queues into
// sets (see driver.Grouper), per queue in two steps: a script reads the
// due groups' oldest members (up to rule.MaxSize per set) by the server's
// clock, the sets are built here with driver.GroupSet, as every store
// builds them, and a second script stores each set and deletes its
// members only while they are still the oldest of their group, so that a
// member another gather took, or one cancelled meanwhile, skips its set
// whole. Each queue's keys share a slot, so both steps work on a Cluster.
func (q *Queue) GatherGroups(ctx context.Context, queues []string, name string, rule driver.GroupRule) (int, error) {
	doing := "gathering the groups of " + name
	if err := ctxErr(ctx, doing); err != nil {
		return 0, err
	}
	if len(queues) == 0 {
		queues = []string{queue.DefaultQueue}
	}
	sets := 0
	for _, qn := range queues {
		b := q.base(qn)
		for range gatherRounds {
			due, more, err := q.groupsDue(ctx, b, name, rule)
			if err != nil {
				return sets, wrap(doing, err)
			}
			if len(due) == 0 {
				break
			}
			n, err := q.storeSets(ctx, b, name, due)
			sets += n
			if err != nil {
				return sets, wrap(doing, err)
			}
			if !more || n == 0 {
				break
			}
		}
	}
	return sets, nil
}

// dueSet is one set groupsDueScript read: the group key and the members.
type dueSet struct {
	key     string
	members []queue.Job
}

// groupsDue runs groupsDueScript on the queue of base, the rule's times
// rounded up to whole milliseconds (a group is never gathered early).
func (q *Queue) groupsDue(ctx context.Context, base, name string, rule driver.GroupRule) (sets []dueSet, more bool, err error) {
	out, err := groupsDueScript.Run(ctx, q.rdb, []string{base}, name,
		ceilMillis(rule.Grace), ceilMillis(rule.MaxDelay), rule.MaxSize, gatherCap).Slice()
	if err != nil {
		return nil, false, err
	}
	if len(out) == 0 {
		return nil, false, fmt.Errorf("the groups script answered nothing")
	}
	m, _ := out[0].(int64)
	for _, v := range out[1:] {
		set, _ := v.([]any)
		if len(set) < 2 {
			return nil, false, fmt.Errorf("the groups script answered a set of %d values", len(set))
		}
		ds := dueSet{members: make([]queue.Job, 0, len(set)-1)}
		ds.key, _ = set[0].(string)
		for _, row := range set[1:] {
			fields, _ := row.([]any)
			j, err := decodeJob(fields)
			if err != nil {
				return nil, false, err
			}
			ds.members = append(ds.members, j)
		}
		sets = append(sets, ds)
	}
	return sets, m == 1, nil
}

// storeSets runs gatherScript on the sets of the queue of base and
// reports how many it stored. A set takes its times from the server's
// clock, as a pushed job does.
func (q *Queue) storeSets(ctx context.Context, base, name string, due []dueSet) (int, error) {
	ks := newKeyset(q.idsKey(base), q.qsetKey(base))
	at := ks.of(base)
	args := []any{q.wake, name, len(due)}
	for _, ds := range due {
		args = append(args, ds.key, len(ds.members))
		for _, m := range ds.members {
			args = append(args, m.ID)
		}
		set := driver.GroupSet(ds.members, ds.members[0].CreatedAt)
		set.CreatedAt, set.AvailableAt = time.Time{}, time.Time{}
		var err error
		if args, err = q.pushArgsAt(args, at, &set); err != nil {
			return 0, err
		}
	}
	return gatherScript.Run(ctx, q.rdb, ks.keys, args...).Int()
}

var _ driver.Grouper = (*Queue)(nil)
