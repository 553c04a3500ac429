package redisqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// maxDeadPage caps one DeadLetters call, as in the other drivers.
const maxDeadPage = 1000

// chunk bounds the jobs one FlushDead or Purge script deletes; the call
// runs the script again until a queue has none left.
const chunk = 500

// names returns [name], or every queue the prefix has held jobs in when
// name is "".
func (q *Queue) names(ctx context.Context, name string) ([]string, error) {
	if name != "" {
		return []string{name}, nil
	}
	all, err := q.rdb.SMembers(ctx, q.queues).Result()
	if err != nil {
		return nil, err
	}
	slices.Sort(all)
	return all, nil
}

// jobFields are the fields HMGET reads for a job, in decodeJob's order.
var jobFields = []string{"id", "q", "n", "p", "pr", "a", "ma", "to", "uk", "tg", "md", "av", "cr", "le", "tk", "ex", "sn", "rc", "ru"}

// DeadLetters lists up to limit dead letters of queueName ("" for every
// queue), most recently failed first. A limit below 1 or above 1000 is
// taken as 1000.
func (q *Queue) DeadLetters(ctx context.Context, queueName string, limit int) ([]queue.Job, error) {
	const doing = "listing dead letters"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	if limit < 1 || limit > maxDeadPage {
		limit = maxDeadPage
	}
	names, err := q.names(ctx, queueName)
	if err != nil {
		return nil, wrap(doing, err)
	}
	type dead struct {
		base string
		id   string
		at   float64
	}
	var all []dead
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.ZRevRangeWithScores(ctx, q.base(n)+":dead", 0, int64(limit)-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap(doing, err)
	}
	for i, c := range cmds {
		for _, z := range c.Val() {
			id, _ := z.Member.(string)
			all = append(all, dead{q.base(names[i]), id, z.Score})
		}
	}
	slices.SortStableFunc(all, func(a, b dead) int { return cmp.Or(cmp.Compare(b.at, a.at), cmp.Compare(b.id, a.id)) })
	all = all[:min(limit, len(all))]
	if len(all) == 0 {
		return nil, nil
	}
	pipe = q.rdb.Pipeline()
	gets := make([]*redis.SliceCmd, len(all))
	for i, d := range all {
		gets[i] = pipe.HMGet(ctx, d.base+":j:"+d.id, jobFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap(doing, err)
	}
	jobs := make([]queue.Job, 0, len(all))
	for _, g := range gets {
		v := g.Val()
		if v[0] == nil { // forgotten since the list was read
			continue
		}
		j, err := decodeJob(v)
		if err != nil {
			return nil, wrap(doing, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// RetryDead moves the dead letter id back to ready, available now, with
// its attempts reset (see queue.Queue).
func (q *Queue) RetryDead(ctx context.Context, id string) error {
	doing := "retrying dead letter " + id
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	bases, err := q.idBases(ctx, id)
	if err != nil {
		return wrap(doing, err)
	}
	for _, b := range bases {
		out, err := retryDeadScript.Run(ctx, q.rdb, []string{q.idsKey(b)}, id, q.wake).Slice()
		if err != nil {
			return wrap(doing, err)
		}
		switch code, _ := out[0].(int64); code {
		case 1:
			return nil
		case 2:
			holder, _ := out[1].(string)
			return fmt.Errorf("redisqueue: %s: %w", doing, &driver.DuplicateError{ExistingID: holder})
		}
	}
	return fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
}

// idBases returns the bases whose ID index to look for id in: [""] (the
// prefix's one index) on a standalone server; on a Cluster those of the
// queues whose index holds id, by name (cluster.go).
func (q *Queue) idBases(ctx context.Context, id string) ([]string, error) {
	if !q.cluster {
		return []string{""}, nil
	}
	names, err := q.locate(ctx, id)
	if err != nil {
		return nil, err
	}
	bases := make([]string, len(names))
	for i, n := range names {
		bases[i] = q.base(n)
	}
	return bases, nil
}

// ForgetDead deletes the dead letter id (see queue.Queue).
func (q *Queue) ForgetDead(ctx context.Context, id string) error {
	doing := "forgetting dead letter " + id
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	bases, err := q.idBases(ctx, id)
	if err != nil {
		return wrap(doing, err)
	}
	for _, b := range bases {
		n, err := forgetDeadScript.Run(ctx, q.rdb, []string{q.idsKey(b)}, id, q.wake).Int()
		if err != nil {
			return wrap(doing, err)
		}
		if n > 0 {
			return nil
		}
	}
	return fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
}

// FlushDead deletes every dead letter of queueName ("" for every queue)
// and reports how many it deleted: one script per queue and chunk.
func (q *Queue) FlushDead(ctx context.Context, queueName string) (int, error) {
	return q.drain(ctx, "flushing dead letters", queueName, flushDeadScript)
}

// Purge deletes the ready, scheduled, grouped and sequenced jobs of
// queueName ("" for every queue) and reports how many it removed, freeing their unique keys;
// running jobs and dead letters are left alone. One script per queue and
// chunk: jobs pushed while it runs may be purged too. A batch's member
// is counted cancelled in its batch (see Workflows).
func (q *Queue) Purge(ctx context.Context, queueName string) (int, error) {
	n, err := q.drain(ctx, "purging", queueName, purgeScript)
	if err != nil {
		return n, err
	}
	names, err := q.names(ctx, queueName)
	if err != nil {
		return n, wrap("purging", err)
	}
	return n, wrap("purging", q.settle(ctx, names))
}

// drain runs s on each queue until it deletes nothing more: KEYS = the
// queue's ID index and base, ARGV = chunk and the wake-up channel.
func (q *Queue) drain(ctx context.Context, doing, queueName string, s *redis.Script) (int, error) {
	if err := ctxErr(ctx, doing); err != nil {
		return 0, err
	}
	names, err := q.names(ctx, queueName)
	if err != nil {
		return 0, wrap(doing, err)
	}
	total := 0
	for _, n := range names {
		for {
			k, err := s.Run(ctx, q.rdb, []string{q.idsKey(q.base(n)), q.base(n)}, chunk, q.wake).Int()
			if err != nil {
				return total, wrap(doing, err)
			}
			total += k
			if k == 0 {
				break
			}
		}
	}
	return total, nil
}

// Len reports how many jobs of queueName ("" for every queue) are ready,
// scheduled, running, grouped or sequenced: the sizes of its five sets,
// read in one pipeline.
func (q *Queue) Len(ctx context.Context, queueName string) (int, error) {
	const doing = "counting jobs"
	if err := ctxErr(ctx, doing); err != nil {
		return 0, err
	}
	names, err := q.names(ctx, queueName)
	if err != nil {
		return 0, wrap(doing, err)
	}
	pipe := q.rdb.Pipeline()
	var cmds []*redis.IntCmd
	for _, n := range names {
		b := q.base(n)
		cmds = append(cmds, pipe.ZCard(ctx, b+":ready"), pipe.ZCard(ctx, b+":sched"), pipe.ZCard(ctx, b+":run"), pipe.ZCard(ctx, b+":grp"), pipe.ZCard(ctx, b+":sqw"))
	}
	if len(cmds) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, wrap(doing, err)
	}
	total := 0
	for _, c := range cmds {
		total += int(c.Val())
	}
	return total, nil
}
