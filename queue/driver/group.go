package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"
)

// Groups: many jobs of one name and one group key, gathered for a while
// and handled as one set (asynq's group aggregation).
//
// A job whose Meta carries MetaGroup is a group member. A store with the
// Grouper ability keeps it in StateGrouped, where Reserve never hands it
// out, until Grouper.GatherGroups finds its group due under a GroupRule.
// The gather is one atomic step of the store: it deletes up to
// GroupRule.MaxSize members of the group, oldest first, and stores in
// their place one ordinary ready job, the set (built by GroupSet), whose
// payload is the JSON array of the members' payloads. From there the set
// is a job like any other: Reserve leases it to one consumer at a time, a
// lease that expires hands it out again, and its ack, retry with backoff
// and dead-lettering apply to every member at once, because the set is
// one job. Two gathers that run at once (two processes) never put one
// member in two sets.

// Meta keys of groups.
const (
	// MetaGroup names, on a group member, its group key (queue.Group sets
	// it). A store with Grouper keeps such a job in StateGrouped.
	MetaGroup = "meridian.group"
	// MetaGroupOf names, on a set made by a gather, the group key of its
	// members.
	MetaGroupOf = "meridian.group_of"
	// MetaGroupSize is, on a set, how many members it holds (decimal).
	MetaGroupSize = "meridian.group_size"
)

// StateGrouped is the state of a group member waiting to be gathered into
// a set. It is active: its ID is taken, Len counts it, Purge deletes it
// and Cancel cancels it.
const StateGrouped JobState = "grouped"

// The bounds and defaults of a GroupRule.
const (
	// DefaultGroupGrace is the grace of a GroupRule that sets none.
	DefaultGroupGrace = time.Minute
	// MaxGroupSize bounds GroupRule.MaxSize, and is the size of a set
	// when the rule sets none.
	MaxGroupSize = 1000
)

// ErrGroupRule reports a GroupRule beyond its bounds.
var ErrGroupRule = errors.New("queue: invalid group rule")

// GroupRule says when a group is due to be gathered into a set. A group is
// due when any of these holds:
//
//   - Grace has passed since its newest member was pushed (each new
//     member starts the grace again);
//   - MaxDelay, when above zero, has passed since its oldest member was
//     pushed (a bound on the wait however often members come);
//   - it holds MaxSize members.
//
// A due group gives at most MaxSize members, oldest first, to one set; the
// rest wait for the next gather. The zero Grace means DefaultGroupGrace,
// the zero MaxDelay no bound, the zero MaxSize MaxGroupSize.
type GroupRule struct {
	Grace    time.Duration
	MaxDelay time.Duration
	MaxSize  int
}

// Normalize returns r with its defaults filled in, or an error matching
// ErrGroupRule for a negative field or a MaxSize above MaxGroupSize. Every
// store gets rules already normalized: the Worker checks them once, at
// registration.
func (r GroupRule) Normalize() (GroupRule, error) {
	switch {
	case r.Grace < 0:
		return r, fmt.Errorf("%w: negative Grace %v", ErrGroupRule, r.Grace)
	case r.MaxDelay < 0:
		return r, fmt.Errorf("%w: negative MaxDelay %v", ErrGroupRule, r.MaxDelay)
	case r.MaxSize < 0 || r.MaxSize > MaxGroupSize:
		return r, fmt.Errorf("%w: MaxSize %d is not within 0 to %d", ErrGroupRule, r.MaxSize, MaxGroupSize)
	}
	if r.Grace == 0 {
		r.Grace = DefaultGroupGrace
	}
	if r.MaxSize == 0 {
		r.MaxSize = MaxGroupSize
	}
	return r, nil
}

// Due reports whether a group of n members, the oldest pushed at first
// and the newest at last, is due at now under r (normalized).
func (r GroupRule) Due(n int, first, last, now time.Time) bool {
	return n > 0 && (n >= r.MaxSize || !now.Before(last.Add(r.Grace)) ||
		(r.MaxDelay > 0 && !now.Before(first.Add(r.MaxDelay))))
}

// Grouper is a store that gathers group members (jobs with MetaGroup)
// into sets. A store without it stores such a job as an ordinary one,
// which a group handler then receives as a set of one; queue.Dispatch
// refuses a grouped job for a Queue that lacks it.
type Grouper interface {
	// GatherGroups turns every due group (under rule, normalized) of the
	// jobs named name in queues (an empty list means DefaultQueue) into
	// sets, and reports how many sets it stored. Each set is stored and
	// its members deleted in one atomic step; concurrent gathers, in this
	// process or others, never put one member in two sets, and every set
	// holds the oldest members of its group (a gather that cannot be sure
	// of that, because another holds some of them, leaves the group to a
	// later gather). A group due with more than rule.MaxSize members gives
	// several sets.
	GatherGroups(ctx context.Context, queues []string, name string, rule GroupRule) (int, error)
}

// GroupKeyOf returns j's group key ("" for a job that is no member).
func GroupKeyOf(j Job) string { return j.Meta[MetaGroup] }

// GroupSet returns the set that replaces members (one group, oldest
// first, at least one): a new ready job of their queue and name, with the
// JSON array of their payloads as its payload, the highest of their
// priorities, the oldest member's attempts limit, timeout, tags and meta
// (without MetaGroup), and MetaGroupOf and MetaGroupSize. Its CreatedAt
// and AvailableAt are now. Stores build every set with it, so a set is
// the same on each.
func GroupSet(members []Job, now time.Time) Job {
	first := members[0]
	n := 1
	for _, m := range members {
		n += len(m.Payload) + 1
	}
	var p bytes.Buffer
	p.Grow(n)
	p.WriteByte('[')
	prio := first.Priority
	for i, m := range members {
		if i > 0 {
			p.WriteByte(',')
		}
		p.Write(m.Payload)
		prio = max(prio, m.Priority)
	}
	p.WriteByte(']')
	meta := maps.Clone(first.Meta)
	delete(meta, MetaGroup)
	if meta == nil {
		meta = make(map[string]string, 2)
	}
	meta[MetaGroupOf] = GroupKeyOf(first)
	meta[MetaGroupSize] = strconv.Itoa(len(members))
	return Job{
		ID: NewID(), Queue: first.QueueName(), Name: first.Name, Payload: p.Bytes(),
		Priority: prio, MaxAttempts: first.MaxAttempts, Timeout: first.Timeout,
		Tags: first.Tags, Meta: meta, CreatedAt: now, AvailableAt: now,
	}
}
