package redisqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

var _ driver.Results = (*Queue)(nil)

// Result returns the result stored for job id (see driver.Results). A
// result lives at the job's queue's base (":r:" and the ID), in the slot
// of the script that acked the job, and expires by itself (PX); a reader
// that knows only the ID looks in every queue's base, in one pipeline.
func (q *Queue) Result(ctx context.Context, id string) ([]byte, error) {
	doing := "reading job " + id + "'s result"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	names, err := q.names(ctx, "")
	if err != nil {
		return nil, wrap(doing, err)
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.Get(ctx, q.base(n)+":r:"+id)
	}
	if len(names) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, wrap(doing, err)
		}
	}
	for _, c := range cmds {
		if b, err := c.Bytes(); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
}
