package redisqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Sequences (driver.Sequencer) are kept by the scripts of scripts.go: the
// push's script seats a member (MetaSequence) at the end of its
// sequence's list, <base>:sl:<key>, and enqueues it only when it is the
// list's first (the head); the others wait in state sequenced, in
// <base>:sqw. The ack's script (Completion.Sequence), cancel, ForgetDead,
// FlushDead, Purge and a dead-lettering that releases take the head out
// and make the next member ready in the same script; a retry, a snooze or
// an expired lease enqueue the head again and leave the list alone. Every
// key is in the queue's slot. A job outside sequences costs no command.

// heldScript lists the sequences of one queue held by a dead head, most
// recently dead first: KEYS = base; ARGV = limit. A dead letter that
// still has its sequence key (field sk) holds its sequence: a release
// deletes the field. It returns {id, key, waiting} per sequence, reading
// the dead letters 200 at a time.
var heldScript = redis.NewScript(`
local B, lim = KEYS[1], tonumber(ARGV[1])
local out, start = {}, 0
while #out < lim do
  local ds = redis.call('ZREVRANGE', B..':dead', start, start + 199)
  if #ds == 0 then break end
  for _, id in ipairs(ds) do
    local sk = redis.call('HGET', B..':j:'..id, 'sk')
    if sk then
      out[#out+1] = {id, sk, redis.call('LLEN', B..':sl:'..sk) - 1}
      if #out >= lim then break end
    end
  end
  start = start + 200
end
return out
`)

// releaseScript releases the sequence ARGV[1] of the queue KEYS[1] held by
// its dead head: the head leaves it (its field sk goes) and the next
// member becomes ready. ARGV = key, channel. It returns 1, or 0 when the
// sequence is not held by a dead head.
var releaseScript = redis.NewScript(prelude + `
local B, sk = KEYS[1], ARGV[1]
local h = redis.call('LINDEX', B..':sl:'..sk, 0)
if not h then return 0 end
local jk = B..':j:'..h
if redis.call('HGET', jk, 'st') ~= 'd' then return 0 end
leave_seq(B, h, sk, now_ms())
redis.call('HDEL', jk, 'sk')
publish(ARGV[2], {})
return 1
`)

// HeldSequences lists up to limit sequences of queueName ("" for every
// queue) whose head is a dead letter that holds them, most recently dead
// first (see driver.Sequencer): one script per queue, which reads its
// dead letters newest first.
func (q *Queue) HeldSequences(ctx context.Context, queueName string, limit int) ([]driver.SequenceInfo, error) {
	const doing = "listing held sequences"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	limit = driver.HeldLimit(limit)
	names, err := q.names(ctx, queueName)
	if err != nil {
		return nil, wrap(doing, err)
	}
	var out []driver.SequenceInfo
	for _, name := range names {
		rows, err := heldScript.Run(ctx, q.rdb, []string{q.base(name)}, limit).Slice()
		if err != nil {
			return nil, wrap(doing, err)
		}
		for _, r := range rows {
			v, _ := r.([]any)
			if len(v) != 3 {
				return nil, wrap(doing, fmt.Errorf("the script answered a row of %d values", len(v)))
			}
			id, _ := v[0].(string)
			key, _ := v[1].(string)
			waiting, _ := v[2].(int64)
			head, err := q.GetJob(ctx, id)
			if errors.Is(err, queue.ErrNotFound) {
				continue // forgotten meanwhile
			}
			if err != nil {
				return nil, err
			}
			out = append(out, driver.SequenceInfo{Queue: name, Key: key, Head: head, Waiting: int(waiting)})
		}
	}
	slices.SortStableFunc(out, func(a, b driver.SequenceInfo) int {
		return b.Head.FinishedAt.Compare(a.Head.FinishedAt)
	})
	return out[:min(len(out), limit)], nil
}

// ReleaseSequence releases the sequence key of queueName held by its dead
// head (see driver.Sequencer): the head stays a dead letter, outside the
// sequence, and the next member becomes ready, in one script.
func (q *Queue) ReleaseSequence(ctx context.Context, queueName, key string) error {
	doing := "releasing sequence " + key
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	name := cmp.Or(queueName, queue.DefaultQueue)
	n, err := releaseScript.Run(ctx, q.rdb, []string{q.base(name)}, key, q.wake).Int()
	if err != nil {
		return wrap(doing, err)
	}
	if n == 0 {
		return fmt.Errorf("redisqueue: %s of queue %s: %w", doing, name, queue.ErrNotFound)
	}
	return nil
}

var _ driver.Sequencer = (*Queue)(nil)
