package redisqueue

import (
	"cmp"
	"context"
	"slices"
)

// A chain needs no keys of its own: a step's next job (or its catch job)
// rides in the Completion that finishes the step (queue.Chain). When the
// next job goes to the step's own queue, the completing script stores it
// with the outcome. When it goes to another queue, which on Redis Cluster
// is another hash slot, it crosses as a batch member's outcome does
// (scripts_batch.go), in two steps:
//
//  1. the outcome and the push noted in the step queue's outbox, under a
//     guard naming the step's lease and the push's place, in the
//     completing script;
//  2. the job stored in its queue unless the guard is in that queue's
//     <base>:once (pushOnceScript), then the note deleted.
//
// Complete runs both before it returns; a process killed between them
// leaves the note, and the next reservation from the step's queue stores
// the job, once.

// pushMark is the second field of a push noted in an outbox (a job ID
// cannot be it: IDs have no NUL).
const pushMark = "\x00push"

// guardRetention is how long a guard of a noted push is kept: a note
// retried later than that would push its job again.
const guardRetention = batchRetention

// notedPush is a push noted in an outbox by the completing script: the
// guard and the job's pushFields, its base index left out.
type notedPush struct {
	field  string
	seq    int64
	guard  string
	fields []string
}

// deliver stores each push noted in the outbox out, in the order noted,
// once whatever the retries, and deletes its note.
func (q *Queue) deliver(ctx context.Context, out string, pushes []notedPush) error {
	slices.SortFunc(pushes, func(a, b notedPush) int { return cmp.Compare(a.seq, b.seq) })
	for _, p := range pushes {
		ks, args, err := q.notedPushArgs(ctx, p.guard, p.fields)
		if err != nil {
			return err
		}
		if err := pushOnceScript.Run(ctx, q.rdb, ks.keys, args...).Err(); err != nil {
			return err
		}
		if err := q.batchSweep.step("push-stored"); err != nil {
			return err
		}
		if err := q.rdb.HDel(ctx, out, p.field).Err(); err != nil {
			return err
		}
	}
	return nil
}

// notedPushArgs registers the queue of a push noted by a script (its
// pushFields, base index left out) and returns pushOnceScript's keys and
// arguments for it under guard.
func (q *Queue) notedPushArgs(ctx context.Context, guard string, fields []string) (*keyset, []any, error) {
	b := q.base(fields[1])
	if err := q.register(ctx, fields[1]); err != nil {
		return nil, nil, err
	}
	ks := newKeyset(q.idsKey(b), q.qsetKey(b))
	args := make([]any, 0, 4+pushFields)
	args = append(args, q.wake, guard)
	for i, f := range fields {
		if i == 2 { // the base index
			args = append(args, ks.of(b))
			continue
		}
		args = append(args, f)
	}
	return ks, append(args, guardRetention.Milliseconds()), nil
}
