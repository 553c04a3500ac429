package redisqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// maxMillis bounds the times stored (about year 33,658 either side of
// 1970), so that a time offset by 10^15 stays a positive 16-digit number
// that a Lua double holds exactly.
const maxMillis = 1e15 - 1

// millis returns t in Unix milliseconds, within ±maxMillis.
func millis(t time.Time) int64 {
	return min(max(t.UnixMilli(), -maxMillis), maxMillis)
}

// ceilMillis returns d in whole milliseconds, rounded up.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// pushArgs appends the pushFields arguments of j (with an ID) to args,
// in push_one's order, its queue's base taken from ks.
func (q *Queue) pushArgs(args []any, ks *keyset, j *queue.Job) ([]any, error) {
	qn := j.QueueName()
	return q.pushArgsAt(args, ks.of(q.base(qn)), j)
}

// pushArgsAt is pushArgs with the base's index given: 0 for a push that a
// completing script notes in its outbox instead of storing (a chain's
// next job in another queue), which on a Cluster must not name a key of
// another slot.
func (q *Queue) pushArgsAt(args []any, index int, j *queue.Job) ([]any, error) {
	qn := j.QueueName()
	var tags, meta string
	if len(j.Tags) > 0 {
		b, err := json.Marshal(j.Tags)
		if err != nil {
			return nil, err
		}
		tags = string(b)
	}
	if len(j.Meta) > 0 {
		b, err := json.Marshal(j.Meta)
		if err != nil {
			return nil, err
		}
		meta = string(b)
	}
	var avail, created, until string
	if !j.AvailableAt.IsZero() {
		avail = strconv.FormatInt(millis(j.AvailableAt), 10)
	}
	if !j.CreatedAt.IsZero() {
		created = strconv.FormatInt(millis(j.CreatedAt), 10)
	}
	if !j.RetryUntil.IsZero() {
		until = strconv.FormatInt(millis(j.RetryUntil), 10)
	}
	var ufor int64
	if j.UniqueKey != "" && j.UniqueFor > 0 {
		ufor = ceilMillis(j.UniqueFor)
	}
	mode := uniqueMode(j)
	return append(args,
		j.ID, qn, index, j.Name, j.Payload,
		strconv.Itoa(j.Priority), strconv.Itoa(j.MaxAttempts), strconv.FormatInt(int64(j.Timeout), 10),
		j.UniqueKey, ufor, mode, tags, meta, avail, created, until,
	), nil
}

// uniqueMode is push_one's unique mode of j: "1" to replace a waiting
// holder (UniqueReplace), else "0", then "d" when j holds its key as a
// dead letter (UniqueStates names dead), which the job's hash keeps (its
// field uh) and the failing script reads. Done and cancelled need no
// letter: the store deletes such jobs at once, so, as on a store that
// keeps none (retention 0), their hold ends with them.
func uniqueMode(j *queue.Job) string {
	if j.UniqueKey == "" {
		return "0"
	}
	mode := "0"
	if j.UniqueReplace {
		mode = "1"
	}
	if slices.Contains(j.UniqueStates, driver.StateDead) {
		mode += "d"
	}
	return mode
}

// Push stores j under Push's contract (see queue.Pusher) in one script: a
// duplicate ID or unique key stores nothing and returns a
// *driver.DuplicateError; the ID of a dead letter moves it back to ready,
// into j's queue, with its attempts reset.
//
// Pushes made at once from many goroutines are coalesced: while the
// Queue's push lanes are busy (WithPushLanes) a Push waits and then goes
// with the others waiting as one script call, each answered as if alone
// (package internal/pushgroup). A Push whose context ends while it waits
// stores nothing; one whose context ends once its group is being written
// returns the context's error, and its job may be stored.
func (q *Queue) Push(ctx context.Context, j queue.Job) error {
	ownID := j.ID == ""
	if ownID {
		j.ID = driver.NewID()
	}
	doing := "pushing job " + j.ID
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	if err := driver.Validate(j); err != nil {
		return err
	}
	return q.group.Push(ctx, groupPusher{q}, q.lanes, j, ownID)
}

// groupPusher is q as the pushgroup.Store of its Pushes: concurrent
// Pushes beyond its push lanes (WithPushLanes) go to Redis as one script
// call, each answered as if alone.
type groupPusher struct{ q *Queue }

// PushAlone stores one job by itself.
func (g groupPusher) PushAlone(ctx context.Context, j queue.Job) error {
	doing := "pushing job " + j.ID
	res, err := g.q.push(ctx, []queue.Job{j})
	if err != nil {
		return wrap(doing, err)
	}
	if res[0] != nil {
		return fmt.Errorf("redisqueue: %s: %w", doing, res[0])
	}
	return nil
}

// PushGroup stores jobs in one script call (per queue on a Cluster),
// each answered on its own: nil, or its duplicate's error.
func (g groupPusher) PushGroup(ctx context.Context, jobs []queue.Job) ([]error, error) {
	res, err := g.q.push(ctx, jobs)
	if err != nil {
		return nil, wrap(fmt.Sprintf("pushing a group of %d jobs", len(jobs)), err)
	}
	for i, e := range res {
		if e != nil {
			res[i] = fmt.Errorf("redisqueue: pushing job %s: %w", jobs[i].ID, e)
		}
	}
	return res, nil
}

// PushMany stores jobs with Push's rules in one script, so all of them or
// none (see driver.BatchPusher): stored[i] is false for a duplicate,
// including a duplicate of an earlier job of the batch. A job without an
// ID is given one.
func (q *Queue) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	doing := fmt.Sprintf("pushing %d jobs", len(jobs))
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	if err := driver.ValidateBatch(jobs); err != nil {
		return nil, err
	}
	stored := make([]bool, len(jobs))
	if len(jobs) == 0 {
		return stored, nil
	}
	withIDs := make([]queue.Job, len(jobs))
	copy(withIDs, jobs)
	for i := range withIDs {
		if withIDs[i].ID == "" {
			withIDs[i].ID = driver.NewID()
		}
	}
	res, err := q.push(ctx, withIDs)
	if err != nil {
		return nil, wrap(doing, err)
	}
	for i, e := range res {
		stored[i] = e == nil
	}
	return stored, nil
}

// push runs pushScript on jobs (validated, with IDs) and returns a
// *driver.DuplicateError or nil per job. On a Cluster it runs once per
// queue, after registering the queues (cluster.go): each queue's jobs
// are stored all or none.
func (q *Queue) push(ctx context.Context, jobs []queue.Job) ([]error, error) {
	if !q.cluster {
		return q.pushIn(ctx, "", jobs)
	}
	names, groups := byQueue(len(jobs), func(i int) string { return jobs[i].QueueName() })
	if err := q.register(ctx, names...); err != nil {
		return nil, err
	}
	if len(names) == 1 {
		return q.pushIn(ctx, q.base(names[0]), jobs)
	}
	res := make([]error, len(jobs))
	for _, n := range names {
		part := make([]queue.Job, len(groups[n]))
		for k, i := range groups[n] {
			part[k] = jobs[i]
		}
		got, err := q.pushIn(ctx, q.base(n), part)
		if err != nil {
			return nil, err
		}
		for k, i := range groups[n] {
			res[i] = got[k]
		}
	}
	return res, nil
}

// pushIn runs pushScript on jobs, all of the queue of base on a Cluster
// (base is "" on a standalone server).
func (q *Queue) pushIn(ctx context.Context, base string, jobs []queue.Job) ([]error, error) {
	ks := newKeyset(q.ids, q.queues)
	if q.cluster {
		ks = newKeyset(q.idsKey(base), q.qsetKey(base))
	}
	args := make([]any, 0, 2+len(jobs)*pushFields)
	args = append(args, q.wake, len(jobs))
	var err error
	for i := range jobs {
		if args, err = q.pushArgs(args, ks, &jobs[i]); err != nil {
			return nil, err
		}
	}
	for i, j := range jobs {
		if len(j.Actions) > 0 {
			args = append(args, i, actionsJSON(j.Actions))
		}
	}
	out, err := pushScript.Run(ctx, q.rdb, ks.keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(out) != 2*len(jobs) {
		return nil, fmt.Errorf("push script answered %d values for %d jobs", len(out), len(jobs))
	}
	res := make([]error, len(jobs))
	for i := range jobs {
		code, _ := out[2*i].(int64)
		holder, _ := out[2*i+1].(string)
		switch code {
		case 1:
		case 0:
			res[i] = &driver.DuplicateError{ExistingID: holder}
		default:
			res[i] = &driver.DuplicateError{ExistingID: holder, UniqueKey: jobs[i].UniqueKey}
		}
	}
	return res, nil
}

// actionsJSON is the field ac of a new job's hash that records acts: the
// JSON array decodeActions reads, an action with a zero At dated now.
func actionsJSON(acts []driver.Action) string {
	now := time.Now()
	es := make([]actionEntry, len(acts))
	for i, a := range acts {
		a = a.Dated(now)
		es[i] = actionEntry{At: a.At.UnixMilli(), By: a.By, What: a.What}
	}
	b, _ := json.Marshal(es)
	return string(b)
}
