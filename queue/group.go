package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// GroupRule says when the members of a group are gathered into one set for
// a group handler (HandleGroup): after Grace without a new member (each new
// member starts it again), after MaxDelay from the oldest member however
// often members come (zero: no bound), or at MaxSize members (zero: 1,000,
// the most). The zero Grace means one minute. See driver.GroupRule.
type GroupRule = driver.GroupRule

// Group makes the job a member of the group key among the jobs of its name
// and queue (asynq's group aggregation). The store keeps it, in state
// "grouped", until its group is due under the rule the handler of its type
// was registered with (HandleGroup), then hands the members due, oldest
// first, to one call of that handler as one set. A member may not carry a
// unique key, and its delay, if any, is not waited for: the group's rule
// alone decides when it runs. Dispatching a member to a Queue without
// group aggregation (driver.Grouper) fails with an error matching
// ErrUnsupported; a Pusher that is not a Queue (a transaction's) cannot be
// asked, and a store without Grouper stores the member through it as an
// ordinary job, which the group handler receives as a set of one. See
// docs/workflows.md#a-digest-as-a-group.
func Group(key string) Option { return Meta(driver.MetaGroup, key) }

// HandleGroup registers fn as the handler of the jobs named for T,
// dispatched with Group: the Worker gathers each group's members under
// rule (on the queues it serves, every process that registers the type
// gathering) and calls fn once per set with the members' values, oldest
// first. The set is one job: it is leased, retried with backoff and
// dead-lettered as a whole, with the attempt limit, timeout and tags of
// its oldest member; a handler that fails runs again with the same set,
// at least once, as any job. A job named for T dispatched without Group
// reaches fn as a set of one. Register a type once with either Handle or
// HandleGroup: the later registration replaces the earlier. Processes that
// register the type should give the same rule; each gathers by its own.
//
// HandleGroup panics if rule is beyond its bounds (a negative duration, a
// MaxSize above 1,000), as registering a handler wrongly is a programming
// error.
func HandleGroup[T any](w *Worker, rule GroupRule, fn func(ctx context.Context, vs []T) error) {
	r, err := rule.Normalize()
	if err != nil {
		panic(fmt.Sprintf("queue: HandleGroup[%s]: %v", NameOf[T](), err))
	}
	name := NameOf[T]()
	var zero T
	if b, ok := any(zero).(BackoffPolicy); ok {
		w.typeBackoff[name] = b
	}
	w.groups[name] = r
	w.Register(name, func(ctx context.Context, j Job) error {
		var vs []T
		if j.Meta[driver.MetaGroupOf] == "" {
			var v T
			if err := json.Unmarshal(j.Payload, &v); err != nil {
				return Permanent(fmt.Errorf("%w: job %s (%s) into %T: %v", ErrDecode, j.ID, name, v, err))
			}
			vs = []T{v}
		} else if err := json.Unmarshal(j.Payload, &vs); err != nil {
			return Permanent(fmt.Errorf("%w: set %s (%s) into %T: %v", ErrDecode, j.ID, name, vs, err))
		}
		return fn(ctx, vs)
	})
}

// checkGroup refuses a group member pushed to a Queue that cannot gather
// it. Other Pushers (a transaction's) cannot be asked (see Group).
func checkGroup(p Pusher, j *Job) error {
	if driver.GroupKeyOf(*j) == "" {
		return nil
	}
	if q, ok := p.(Queue); ok {
		if err := driver.CapabilitiesOf(q).Require("Grouper"); err != nil {
			return fmt.Errorf("queue: dispatching %s to group %q: %w", j.Name, driver.GroupKeyOf(*j), err)
		}
	}
	return nil
}

// gatherEvery is how often a Worker gathers the groups of a rule: a
// quarter of its shortest wait, between 10 ms and one second.
func gatherEvery(r GroupRule) time.Duration {
	d := r.Grace
	if r.MaxDelay > 0 {
		d = min(d, r.MaxDelay)
	}
	return min(max(d/4, 10*time.Millisecond), time.Second)
}

// gather runs one type's gathers until done closes: one GatherGroups call
// per gatherEvery, errors logged and tried again at the next.
func (r *run) gather(g driver.Grouper, name string, rule GroupRule, done <-chan struct{}) {
	t := time.NewTicker(gatherEvery(rule))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if _, err := g.GatherGroups(r.bgCtx, r.queues, name, rule); err != nil && r.bgCtx.Err() == nil {
			r.log.Warn("queue: gathering groups failed; trying again", "name", name, "err", err)
		}
	}
}
