package redisqueue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The Controller ability: pause and resume, cancel, and bulk actions.

// The cancel log ({prefix}:cancels) keeps the leases of jobs cancelled
// while running, for CancelledSince: for cancelKeep, and at most
// cancelLogCap of them (the newest). A Worker asks for the cancels since
// its previous poll, so it needs only the last few seconds; the extender
// looks back one lease.
const (
	cancelKeep   = 24 * time.Hour
	cancelLogCap = 10000
)

// pausedKey and cancelsKey are the prefix's set of paused queue names and
// its cancel log.
func (q *Queue) pausedKey() string  { return "{" + q.prefix + "}:paused" }
func (q *Queue) cancelsKey() string { return "{" + q.prefix + "}:cancels" }

// Pause makes Reserve skip queueName's jobs until Resume, in every
// process that shares the Redis and the prefix (see driver.Controller).
// The reservation script checks the pause in the same step that leases,
// so no job is leased from a queue after Pause returned. Jobs already
// leased run on; pushes are stored as usual.
func (q *Queue) Pause(ctx context.Context, queueName string) error {
	return q.setPaused(ctx, "pausing queue", queueName, true)
}

// Resume undoes Pause and wakes the Waits on the queue.
func (q *Queue) Resume(ctx context.Context, queueName string) error {
	return q.setPaused(ctx, "resuming queue", queueName, false)
}

func (q *Queue) setPaused(ctx context.Context, doing, queueName string, pause bool) error {
	if queueName == "" {
		queueName = queue.DefaultQueue
	}
	doing += " " + queueName
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	flag := "0"
	if pause {
		flag = "1"
	}
	err := pauseScript.Run(ctx, q.rdb, []string{q.queues, q.pausedKey(), q.base(queueName)}, queueName, flag, q.wake).Err()
	return wrap(doing, err)
}

// Paused lists the paused queues, sorted by name.
func (q *Queue) Paused(ctx context.Context) ([]string, error) {
	const doing = "listing paused queues"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	names, err := q.rdb.SMembers(ctx, q.pausedKey()).Result()
	if err != nil {
		return nil, wrap(doing, err)
	}
	slices.Sort(names)
	return names, nil
}

// Cancel cancels the active job id in one script (see
// driver.Controller): a ready or scheduled job is taken off its set, a
// running one off the leased set with its lease written to the cancel
// log, where its Worker finds it (CancelledSince, at the Worker's next
// cancel poll); either way its unique key is freed and the job is
// deleted, since this store keeps no finished jobs, and counted in the
// queue's cancelled total. So a second Cancel of the same ID returns
// ErrNotFound, as does a cancel of a done job; a dead letter's returns
// ErrFinished. A batch member is counted cancelled in its batch through
// its queue's outbox (scripts_batch.go), settled before Cancel returns.
func (q *Queue) Cancel(ctx context.Context, id string) (driver.JobState, error) {
	doing := "cancelling job " + id
	if err := ctxErr(ctx, doing); err != nil {
		return "", err
	}
	out, err := cancelScript.Run(ctx, q.rdb, []string{q.ids, q.cancelsKey()},
		id, time.Now().UnixMilli(), cancelKeep.Milliseconds(), cancelLogCap).Slice()
	if err != nil {
		return "", wrap(doing, err)
	}
	if len(out) != 3 {
		return "", fmt.Errorf("redisqueue: %s: the script answered %d values, want 3", doing, len(out))
	}
	code, _ := out[0].(int64)
	was, _ := out[1].(string)
	switch code {
	case 1:
		if settle, _ := out[2].(string); settle != "" {
			// A batch member: its batch counts it before Cancel returns,
			// or, should that fail, at a later reservation's sweep.
			q.settleLogged(ctx, []string{settle})
		}
		return driver.JobState(was), nil
	case 2:
		return "", fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrFinished)
	}
	return "", fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
}

// CancelledSince returns the leases of jobs cancelled while running at or
// after since, by the cancelling process's clock (see driver.Controller):
// one range read of the cancel log, which keeps the last day's cancels,
// at most 10,000.
func (q *Queue) CancelledSince(ctx context.Context, since time.Time) ([]driver.Lease, error) {
	const doing = "listing cancelled jobs"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	members, err := q.rdb.ZRangeByScore(ctx, q.cancelsKey(), &redis.ZRangeBy{
		Min: strconv.FormatInt(millis(since), 10),
		Max: "+inf",
	}).Result()
	if err != nil {
		return nil, wrap(doing, err)
	}
	out := make([]driver.Lease, 0, len(members))
	for _, m := range members {
		// Job IDs hold no NUL (driver.Validate), so the first one ends
		// the ID.
		if id, tok, ok := strings.Cut(m, "\x00"); ok {
			out = append(out, driver.Lease{JobID: id, Token: tok})
		}
	}
	return out, nil
}
