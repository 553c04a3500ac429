package redisqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// batchRetention is how long a finished batch's keys, and the guards of
// its callbacks' pushes, are kept: GetBatch answers ErrNotFound after it.
const batchRetention = 7 * 24 * time.Hour

// sweepEvery is how often, at most, a Queue's reservations from a queue
// look in its outbox for batch events that a stopped process left.
const sweepEvery = 5 * time.Second

// memberChunk bounds the members one script of a batch's cancel reads or
// cancels.
const memberChunk = 500

var _ driver.Workflows = (*Queue)(nil)

// batchSweep is a Queue's state for batches: the keys of its batch index
// and when each queue's outbox was last looked at.
type batchSweep struct {
	index, bseq  string // {prefix}:batches, {prefix}:bseq
	gindex, gseq string // {prefix}:graphs, {prefix}:gseq
	// graphKeep is how long a finished graph's keys are kept
	// (graphRetention; tests shorten it).
	graphKeep time.Duration

	every time.Duration
	// hook, set by tests, runs at the end of each step of the protocol
	// (see scripts_batch.go) and stops it there when it returns an error,
	// as a process killed at that point would.
	hook func(step string) error

	mu   sync.Mutex
	last map[string]time.Time
}

func (s *batchSweep) init(g string) {
	s.index, s.bseq = g+":batches", g+":bseq"
	s.gindex, s.gseq = g+":graphs", g+":gseq"
	s.graphKeep = graphRetention
	s.every = sweepEvery
	s.last = map[string]time.Time{}
}

// step runs the test hook at the end of the step named.
func (s *batchSweep) step(name string) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(name)
}

// batchBase returns the hash-tagged base of batch id's keys:
// {prefix:%B:id}, id escaped as a queue name is.
func (q *Queue) batchBase(id string) string {
	b := q.base(id) // {prefix:<escaped id>}
	return "{" + q.prefix + ":%B:" + b[len(q.prefix)+2:]
}

// batchKeys are every key of the batch whose base is bb.
func batchKeys(bb string) []string {
	return []string{bb, bb + ":st", bb + ":p", bb + ":d", bb + ":f", bb + ":c", bb + ":rk", bb + ":rl", bb + ":nx"}
}

// batchState is a batch's record as the batch scripts return it.
type batchState struct {
	info     driver.BatchInfo
	rec      driver.BatchRecord
	due      []driver.BatchEvent // marked due, not yet known pushed
	failedID string
	reason   string
	steps    int     // chain steps added as members, not yet known pushed
	release  []int64 // applyBatchScript's places of events to release
}

// decodeBatch reads the values of the scripts' RF; ok is false for an
// unknown batch.
func decodeBatch(v []any) (st batchState, ok bool) {
	if len(v) < len(recordFields) || v[0] == nil {
		return st, false
	}
	s := func(i int) string { x, _ := v[i].(string); return x }
	n := func(i int) int { x, _ := strconv.Atoi(s(i)); return x }
	t := func(i int) time.Time {
		if s(i) == "" {
			return time.Time{}
		}
		ms, _ := strconv.ParseInt(s(i), 10, 64)
		return time.UnixMilli(ms)
	}
	in := driver.BatchInfo{ID: s(0), Name: s(1), AllowFailures: s(2) == "1",
		Total: n(8), Done: n(9), Failed: n(10), Cancelled: n(11),
		CreatedAt: t(3), CancelledAt: t(4), ThenAt: t(5), CatchAt: t(6), FinishedAt: t(7)}
	in.Pending = in.Total - in.Done - in.Failed - in.Cancelled
	st = batchState{info: in, failedID: s(15), reason: s(16), steps: n(18),
		rec: driver.BatchRecord{ID: in.ID, Name: in.Name, AllowFailures: in.AllowFailures, Callbacks: s(17)}}
	for i, ev := range []driver.BatchEvent{driver.BatchThen, driver.BatchCatch, driver.BatchFinally} {
		if s(12+i) != "" {
			st.due = append(st.due, ev)
		}
	}
	for _, x := range v[len(recordFields):] {
		if k, ok := x.(int64); ok {
			st.release = append(st.release, k)
		}
	}
	return st, true
}

// recordFields are the scripts' RF, for reading a record without one.
var recordFields = []string{"id", "nm", "af", "cr", "ca", "ta", "ka", "fa", "tot", "don", "fai", "can", "pt", "pk", "pf", "kf", "kr", "cb", "nx"}

// dueMark is the record's field that marks ev due.
var dueMark = map[driver.BatchEvent]string{driver.BatchThen: "pt", driver.BatchCatch: "pk", driver.BatchFinally: "pf"}

// memberArgs appends each job's (ID, queue) to args.
func memberArgs(args []any, jobs []queue.Job) []any {
	for _, j := range jobs {
		args = append(args, j.ID, j.QueueName())
	}
	return args
}

// withIDs returns a copy of jobs, each with an ID.
func withIDs(jobs []queue.Job) []queue.Job {
	out := slices.Clone(jobs)
	for i := range out {
		if out[i].ID == "" {
			out[i].ID = driver.NewID()
		}
	}
	return out
}

// PushBatch stores rec and pushes jobs as its members (see
// driver.BatchDispatcher), in three steps: the record with every member
// pending, in the batch's slot; its entry in the batch index; the members,
// one push script. A push that fails takes the first two back. A process
// killed between the first and the last step leaves a batch whose
// members were never pushed: GetBatch shows them pending, and CancelBatch
// finishes it (docs/drivers.md).
func (q *Queue) PushBatch(ctx context.Context, rec driver.BatchRecord, jobs []queue.Job) (int, error) {
	doing := "pushing batch " + rec.ID
	if err := ctxErr(ctx, doing); err != nil {
		return 0, err
	}
	if rec.ID == "" {
		return 0, fmt.Errorf("redisqueue: %s: %w: a batch needs an ID", doing, queue.ErrBatch)
	}
	if err := driver.ValidateBatch(jobs); err != nil {
		return 0, err
	}
	jobs = withIDs(jobs)
	af := "0"
	if rec.AllowFailures {
		af = "1"
	}
	bb := q.batchBase(rec.ID)
	created, err := createBatchScript.Run(ctx, q.rdb, []string{bb}, memberArgs([]any{rec.ID, rec.Name, af, rec.Callbacks}, jobs)...).Int()
	if err != nil {
		return 0, wrap(doing, err)
	}
	if created == 0 {
		return 0, fmt.Errorf("redisqueue: %s: %w", doing, &driver.DuplicateError{ExistingID: rec.ID})
	}
	if err := q.batchSweep.step("batch-created"); err != nil {
		return 0, err
	}
	if err := indexBatchScript.Run(ctx, q.rdb, []string{q.index, q.bseq}, rec.ID).Err(); err != nil {
		q.undoBatch(ctx, rec.ID)
		return 0, wrap(doing, err)
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	res, err := q.push(ctx, jobs)
	if err != nil {
		q.undoBatch(ctx, rec.ID)
		return 0, wrap(doing, err)
	}
	stored, err := q.dropUnstored(ctx, rec.ID, jobs, res)
	return stored, wrap(doing, err)
}

// undoBatch deletes a batch whose members' push failed, and its index
// entry, under a context of its own: ctx may be what ended the push.
func (q *Queue) undoBatch(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := q.rdb.Del(ctx, batchKeys(q.batchBase(id))...).Err()
	err = errors.Join(err, q.rdb.ZRem(ctx, q.index, id).Err())
	if err != nil {
		q.log.Warn("redisqueue: taking back a batch whose members were not pushed", "batch", id, "err", err)
	}
}

// dropUnstored takes the jobs that the push res skipped as duplicates
// out of batch id's members, and returns how many were stored.
func (q *Queue) dropUnstored(ctx context.Context, id string, jobs []queue.Job, res []error) (int, error) {
	stored := map[string]bool{}
	n := 0
	for i, e := range res {
		if e == nil {
			stored[jobs[i].ID] = true
			n++
		}
	}
	args := []any{batchRetention.Milliseconds()}
	for _, j := range jobs {
		if !stored[j.ID] {
			args = append(args, j.ID)
		}
	}
	if len(args) == 1 {
		return n, nil
	}
	v, err := dropMembersScript.Run(ctx, q.rdb, []string{q.batchBase(id)}, args...).Slice()
	if err != nil {
		return n, err
	}
	if st, ok := decodeBatch(v); ok {
		return n, q.follow(ctx, st, false)
	}
	return n, nil
}

// AddToBatch pushes jobs as new members of batch id (see
// driver.Workflows): they are added pending in the batch's slot, then
// pushed. IDs that are members already are not added again.
func (q *Queue) AddToBatch(ctx context.Context, id string, jobs []queue.Job) (int, error) {
	doing := "adding to batch " + id
	if err := ctxErr(ctx, doing); err != nil {
		return 0, err
	}
	if err := driver.ValidateBatch(jobs); err != nil {
		return 0, err
	}
	if id == "" {
		return 0, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	jobs = withIDs(jobs)
	out, err := addToBatchScript.Run(ctx, q.rdb, []string{q.batchBase(id)}, memberArgs(nil, jobs)...).Slice()
	if err != nil {
		return 0, wrap(doing, err)
	}
	switch code, _ := out[0].(int64); code {
	case 0:
		return 0, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	case 2:
		return 0, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrBatchClosed)
	}
	added := map[string]bool{}
	for _, x := range out[1:] {
		s, _ := x.(string)
		added[s] = true
	}
	var push []queue.Job
	for _, j := range jobs {
		if added[j.ID] {
			push = append(push, j)
			delete(added, j.ID) // a repeated ID is pushed once
		}
	}
	if len(push) == 0 {
		return 0, nil
	}
	res, err := q.push(ctx, push)
	if err != nil {
		// Nothing was pushed: take every member added back.
		res = make([]error, len(push))
		for i := range res {
			res[i] = err
		}
		_, derr := q.dropUnstored(context.WithoutCancel(ctx), id, push, res)
		return 0, wrap(doing, errors.Join(err, derr))
	}
	n, err := q.dropUnstored(ctx, id, push, res)
	return n, wrap(doing, err)
}

// CancelBatch cancels batch id (see driver.Workflows): it marks the
// batch cancelled in its slot, then cancels its pending members queue by
// queue, each counted in the batch through its queue's outbox. Calling it
// again finishes what a call cut short began.
func (q *Queue) CancelBatch(ctx context.Context, id string) (driver.BatchInfo, error) {
	doing := "cancelling batch " + id
	if err := ctxErr(ctx, doing); err != nil {
		return driver.BatchInfo{}, err
	}
	if id == "" {
		return driver.BatchInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	v, err := cancelBatchScript.Run(ctx, q.rdb, []string{q.batchBase(id)}).Slice()
	if err != nil {
		return driver.BatchInfo{}, wrap(doing, err)
	}
	st, ok := decodeBatch(v)
	if !ok {
		return driver.BatchInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	if err := q.batchSweep.step("batch-cancel-marked"); err != nil {
		return driver.BatchInfo{}, err
	}
	if err := q.follow(ctx, st, false); err != nil {
		return driver.BatchInfo{}, wrap(doing, err)
	}
	return q.GetBatch(ctx, id)
}

// GetBatch reads batch id (see driver.Workflows).
func (q *Queue) GetBatch(ctx context.Context, id string) (driver.BatchInfo, error) {
	doing := "reading batch " + id
	if err := ctxErr(ctx, doing); err != nil {
		return driver.BatchInfo{}, err
	}
	if id == "" {
		return driver.BatchInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	v, err := q.rdb.HMGet(ctx, q.batchBase(id), recordFields...).Result()
	if err != nil {
		return driver.BatchInfo{}, wrap(doing, err)
	}
	st, ok := decodeBatch(v)
	if !ok {
		return driver.BatchInfo{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	return st.info, nil
}

// ListBatches pages through the batches, newest first (see
// driver.Workflows). Next is the index's sequence of the page's last
// batch. Index entries of batches past their retention are deleted as
// they are met.
func (q *Queue) ListBatches(ctx context.Context, f driver.BatchFilter) (driver.BatchPage, error) {
	const doing = "listing batches"
	if err := ctxErr(ctx, doing); err != nil {
		return driver.BatchPage{}, err
	}
	limit, err := driver.BatchLimit(f.Limit)
	if err != nil {
		return driver.BatchPage{}, err
	}
	batches, next, err := indexPage(ctx, q, q.index, limit, f.After, queue.ErrBatch, q.batchBase, recordFields, func(v []any) (driver.BatchInfo, bool) {
		st, ok := decodeBatch(v)
		return st.info, ok
	})
	if err != nil {
		return driver.BatchPage{}, wrap(doing, err)
	}
	return driver.BatchPage{Batches: batches, Next: next}, nil
}

// indexPage reads a page of up to limit records listed in the sorted set
// index (batches, graphs), highest score first, after the score after
// ("" from the top; one that is no integer is refused with bad): each
// record's fields are read from the hash base(ID) in one pipeline and
// made a T by decode, whose ok false skips the record. A record whose
// hash is gone (its first field nil: past its retention) is taken off
// the index as met. next is the cursor of the page after, "" at the end.
func indexPage[T any](ctx context.Context, q *Queue, index string, limit int, after string, bad error, base func(string) string, fields []string, decode func([]any) (T, bool)) (items []T, next string, err error) {
	maxScore := "+inf"
	if after != "" {
		if _, err := strconv.ParseInt(after, 10, 64); err != nil {
			return nil, "", fmt.Errorf("%w: page cursor %q", bad, after)
		}
		maxScore = "(" + after
	}
	var seqs []int64
	for len(items) <= limit {
		want := int64(limit + 1 - len(items))
		zs, err := q.rdb.ZRevRangeByScoreWithScores(ctx, index, &redis.ZRangeBy{Max: maxScore, Min: "-inf", Count: want}).Result()
		if err != nil {
			return nil, "", err
		}
		pipe := q.rdb.Pipeline()
		gets := make([]*redis.SliceCmd, len(zs))
		for i, z := range zs {
			id, _ := z.Member.(string)
			gets[i] = pipe.HMGet(ctx, base(id), fields...)
		}
		if len(zs) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, "", err
			}
		}
		for i, z := range zs {
			v := gets[i].Val()
			item, ok := decode(v)
			if !ok {
				if len(v) > 0 && v[0] == nil {
					q.rdb.ZRem(ctx, index, z.Member)
				}
				continue
			}
			items = append(items, item)
			seqs = append(seqs, int64(z.Score))
		}
		if int64(len(zs)) < want {
			break
		}
		maxScore = "(" + strconv.FormatInt(int64(zs[len(zs)-1].Score), 10)
	}
	if len(items) > limit {
		items, next = items[:limit], strconv.FormatInt(seqs[limit-1], 10)
	}
	return items, next, nil
}

// memberStates maps the scripts' state letters to the contract's.
var memberStates = map[string]driver.BatchMemberState{
	"p": driver.MemberPending, "d": driver.MemberDone, "f": driver.MemberFailed, "c": driver.MemberCancelled,
}

// BatchMembers pages through batch id's members in job ID order (see
// driver.Workflows): one script reads up to a page from each state's set,
// merged here.
func (q *Queue) BatchMembers(ctx context.Context, id string, f driver.MemberFilter) (driver.MemberPage, error) {
	doing := "listing the members of batch " + id
	if err := ctxErr(ctx, doing); err != nil {
		return driver.MemberPage{}, err
	}
	limit, err := driver.BatchLimit(f.Limit)
	if err != nil {
		return driver.MemberPage{}, err
	}
	state := ""
	if f.State != "" {
		for k, s := range memberStates {
			if s == f.State {
				state = k
			}
		}
		if state == "" {
			return driver.MemberPage{}, fmt.Errorf("%w: member state %q", queue.ErrBatch, f.State)
		}
	}
	if id == "" {
		return driver.MemberPage{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	out, err := membersScript.Run(ctx, q.rdb, []string{q.batchBase(id)}, state, f.After, limit+1).Slice()
	if err != nil {
		return driver.MemberPage{}, wrap(doing, err)
	}
	if code, _ := out[0].(int64); code == 0 {
		return driver.MemberPage{}, fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrNotFound)
	}
	var ms []driver.BatchMember
	for i := 1; i+1 < len(out); i += 2 {
		jid, _ := out[i].(string)
		s, _ := out[i+1].(string)
		ms = append(ms, driver.BatchMember{JobID: jid, State: memberStates[s]})
	}
	slices.SortFunc(ms, func(a, b driver.BatchMember) int { return cmp.Compare(a.JobID, b.JobID) })
	var page driver.MemberPage
	if len(ms) > limit {
		ms = ms[:limit]
		page.Next = ms[limit-1].JobID
	}
	page.Members = ms
	return page, nil
}

// memberEvent is one event of a queue's outbox: member job of batch
// ended with outcome ("0" done, "2" failed, "3" cancelled); keep is the
// ms its result, kept without expiry, is kept once the batch finishes
// ("" for none); steps are a done member's pushes, its chain's next step.
type memberEvent struct {
	field                             string
	seq                               int64
	batch, job, outcome, reason, keep string
	steps                             []stepPush
}

// stepPush is a chain step that a done member's event names: its job's
// ID and queue, and its push (pushFields, base index left out) packed as
// the batch keeps it until pushed.
type stepPush struct{ id, queue, packed string }

// stepFields is how many fields a step takes in a member's event.
const stepFields = pushFields

// stepGuard is the guard in <base>:once of the push of chain step id of
// batch bid (IDs have no NUL).
func stepGuard(bid, id string) string { return bid + "\x00step\x00" + id }

// memberStepsOf reads the steps of a member's event fields p, which
// follow its first five.
func memberStepsOf(p []string) []stepPush {
	var out []stepPush
	for r := p[5:]; len(r) > 0; r = r[stepFields:] {
		out = append(out, stepPush{id: r[0], queue: r[1], packed: pack(r[:stepFields]...)})
	}
	return out
}

// pack joins fields as <length>:<bytes> each, as the scripts' pack does.
func pack(fields ...string) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(strconv.Itoa(len(f)))
		b.WriteByte(':')
		b.WriteString(f)
	}
	return b.String()
}

// unpack splits the <length>:<bytes> fields of pack.
func unpack(s string) ([]string, bool) {
	var out []string
	for s != "" {
		i := 0
		for i < len(s) && s[i] != ':' {
			i++
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil || i+1+n > len(s) {
			return nil, false
		}
		out = append(out, s[i+1:i+1+n])
		s = s[i+1+n:]
	}
	return out, true
}

// settleLogged runs settle and logs its error: the events stay in the
// outboxes, and a later sweep runs them again.
func (q *Queue) settleLogged(ctx context.Context, names []string) {
	if err := q.settle(ctx, names); err != nil {
		q.log.Warn("redisqueue: batch events left for a later reservation", "queues", names, "err", err)
	}
}

// sweep settles the outboxes of queues not looked at in the last
// sweepEvery: events left by a process that stopped between two steps.
func (q *Queue) sweep(ctx context.Context, queues []string) {
	s := &q.batchSweep
	now := time.Now()
	var due []string
	s.mu.Lock()
	for _, n := range queues {
		if now.Sub(s.last[n]) >= s.every {
			s.last[n] = now
			due = append(due, n)
		}
	}
	s.mu.Unlock()
	if len(due) > 0 {
		q.settleLogged(ctx, due)
	}
}

// settle runs steps 2 to 4 of scripts_batch.go for every event in the
// outboxes of queues names, and stores the pushes noted there (chain.go).
func (q *Queue) settle(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := q.settleQueue(ctx, n, ""); err != nil {
			return err
		}
	}
	return nil
}

// settleQueue applies the events of one queue's outbox to their batches
// and graphs (graph.go),
// in the order they were noted, does what each batch then has to do
// (not the cancel of the members of the batch or graph whose base is
// cancelling, which the caller is doing),
// and deletes the events.
func (q *Queue) settleQueue(ctx context.Context, name, cancelling string) error {
	if err := q.batchSweep.step("member-noted"); err != nil {
		return err
	}
	out := q.base(name) + ":bout"
	m, err := q.rdb.HGetAll(ctx, out).Result()
	if err != nil || len(m) == 0 {
		return err
	}
	evs := make([]memberEvent, 0, len(m))
	var pushes []notedPush
	var nodes []nodeEvent
	for f, v := range m {
		seq, _ := strconv.ParseInt(f, 10, 64)
		p, ok := unpack(v)
		switch {
		case ok && len(p) == 5 && p[0] == graphMark:
			nodes = append(nodes, nodeEvent{field: f, seq: seq, graph: p[1], job: p[2], outcome: p[3], keep: p[4]})
		case ok && len(p) == 4: // noted before results were kept
			evs = append(evs, memberEvent{field: f, seq: seq, batch: p[0], job: p[1], outcome: p[2], reason: p[3]})
		case ok && len(p) >= 5 && p[1] != pushMark && (len(p)-5)%stepFields == 0:
			evs = append(evs, memberEvent{field: f, seq: seq, batch: p[0], job: p[1], outcome: p[2], reason: p[3], keep: p[4], steps: memberStepsOf(p)})
		case ok && len(p) == 2+pushFields && p[1] == pushMark:
			pushes = append(pushes, notedPush{field: f, seq: seq, guard: p[0], fields: p[2:]})
		default:
			q.log.Warn("redisqueue: an unreadable outbox event dropped", "queue", name, "event", v)
			q.rdb.HDel(ctx, out, f)
		}
	}
	if err := q.deliver(ctx, out, pushes); err != nil {
		return err
	}
	slices.SortFunc(evs, func(a, b memberEvent) int { return cmp.Compare(a.seq, b.seq) })
	var order []string
	byBatch := map[string][]memberEvent{}
	for _, e := range evs {
		if byBatch[e.batch] == nil {
			order = append(order, e.batch)
		}
		byBatch[e.batch] = append(byBatch[e.batch], e)
	}
	for _, bid := range order {
		for es := range slices.Chunk(byBatch[bid], memberChunk) {
			if err := q.applyEvents(ctx, out, bid, es, cancelling == q.batchBase(bid)); err != nil {
				return err
			}
		}
	}
	return q.settleNodeEvents(ctx, name, nodes, cancelling)
}

// applyEvents applies es, events of batch bid from the outbox out, in one
// script of the batch's slot, does what the batch then has to do, and
// deletes the events.
func (q *Queue) applyEvents(ctx context.Context, out, bid string, es []memberEvent, inCancel bool) error {
	args := []any{batchRetention.Milliseconds()}
	fields := make([]string, len(es))
	for i, e := range es {
		args = append(args, e.job, e.outcome, e.reason, e.keep, len(e.steps))
		for _, s := range e.steps {
			args = append(args, s.id, s.queue, s.packed)
		}
		fields[i] = e.field
	}
	v, err := applyBatchScript.Run(ctx, q.rdb, []string{q.batchBase(bid)}, args...).Slice()
	if err != nil {
		return err
	}
	if err := q.batchSweep.step("events-applied"); err != nil {
		return err
	}
	var release []memberEvent
	if st, ok := decodeBatch(v); ok {
		for _, k := range st.release {
			if k >= 1 && int(k) <= len(es) {
				release = append(release, es[k-1])
			}
		}
		if err := q.follow(ctx, st, inCancel); err != nil {
			return err
		}
	} else { // an unknown batch's events are dropped, their results released
		for _, e := range es {
			if e.keep != "" {
				release = append(release, e)
			}
		}
	}
	name := strings.TrimSuffix(out, ":bout")
	for _, e := range release {
		if err := q.rdb.PExpire(ctx, name+":r:"+e.job, keepMS(e.keep)).Err(); err != nil {
			return err
		}
	}
	return q.rdb.HDel(ctx, out, fields...).Err()
}

// follow does what batch st has to do: push each chain step it added as
// a member and each callback marked due, once (step 3), and cancel its
// pending members if it was cancelled (unless inCancel).
func (q *Queue) follow(ctx context.Context, st batchState, inCancel bool) error {
	if st.steps > 0 {
		var err error
		if st, err = q.pushSteps(ctx, st); err != nil {
			return err
		}
	}
	for _, ev := range st.due {
		j, err := st.rec.Callback(ev, st.failedID, st.reason)
		if err != nil {
			// Unreadable callbacks (a record corrupted by hand) cannot be
			// pushed by any retry.
			q.log.Warn("redisqueue: a batch callback dropped", "batch", st.info.ID, "event", ev, "err", err)
		}
		if j != nil {
			if err := q.pushCallback(ctx, st.info.ID, ev, *j); err != nil {
				return err
			}
		}
		if err := q.batchSweep.step("callback-pushed"); err != nil {
			return err
		}
		if err := pushedScript.Run(ctx, q.rdb, []string{q.batchBase(st.info.ID)}, dueMark[ev]).Err(); err != nil {
			return err
		}
	}
	if st.info.Finished() {
		return q.releaseMembers(ctx, st.info.ID)
	}
	if inCancel || st.info.CancelledAt.IsZero() || st.info.Pending == 0 {
		return nil
	}
	return q.cancelMembers(ctx, st.info.ID)
}

// pushSteps pushes the chain steps batch st added as members (step 3),
// a chunk at a time: each into its queue once whatever the retries
// (pushOnceScript, under stepGuard), then its push taken off the batch,
// a step never stored dropped from the members (stepPushedScript). It
// returns the record as the last script left it.
func (q *Queue) pushSteps(ctx context.Context, st batchState) (batchState, error) {
	bb := q.batchBase(st.info.ID)
	for {
		v, err := batchStepsScript.Run(ctx, q.rdb, []string{bb}, memberChunk).StringSlice()
		if err != nil {
			return st, err
		}
		for i := 0; i+1 < len(v); i += 2 {
			id, packed := v[i], v[i+1]
			p, ok := unpack(packed)
			stored := "1"
			if err := q.batchSweep.step("steps-read"); err != nil {
				return st, err
			}
			if ok && len(p) == stepFields {
				if stored, err = q.pushStep(ctx, stepGuard(st.info.ID, id), p); err != nil {
					return st, err
				}
			} else {
				q.log.Warn("redisqueue: an unreadable chain step of a batch dropped", "batch", st.info.ID, "step", id)
				stored = "0"
			}
			if err := q.batchSweep.step("step-pushed"); err != nil {
				return st, err
			}
			r, err := stepPushedScript.Run(ctx, q.rdb, []string{bb}, batchRetention.Milliseconds(), id, stored).Slice()
			if err != nil {
				return st, err
			}
			if s, ok := decodeBatch(r); ok {
				st = s
			}
		}
		if len(v) < 2*memberChunk {
			return st, nil
		}
	}
}

// pushStep pushes a chain step whose pushFields (base index left out)
// are fields under guard, once: it returns "1" when that push, now or in
// an earlier run, stored the job, "0" when it stored nothing (an active
// job held its ID).
func (q *Queue) pushStep(ctx context.Context, guard string, fields []string) (string, error) {
	ks, args, err := q.notedPushArgs(ctx, guard, fields)
	if err != nil {
		return "", err
	}
	out, err := pushOnceScript.Run(ctx, q.rdb, ks.keys, append(args, "1")...).Slice()
	if err != nil {
		return "", err
	}
	if len(out) == 2 {
		if s, _ := out[1].(int64); s != 1 {
			return "0", nil
		}
	}
	return "1", nil
}

// releaseMembers starts the retention of the results finished batch bid
// kept for its done members, each entry of its release list taken off
// once released, so that a process killed in between leaves the rest to
// the next sweep (the events stay in the outbox until this returns).
func (q *Queue) releaseMembers(ctx context.Context, bid string) error {
	bb := q.batchBase(bid)
	for {
		v, err := batchReleasesScript.Run(ctx, q.rdb, []string{bb}, memberChunk).Slice()
		if err != nil {
			return err
		}
		str := func(x any) string { s, _ := x.(string); return s }
		for i := 0; i+2 < len(v); i += 3 {
			entry, id, name := str(v[i]), str(v[i+1]), str(v[i+2])
			keep, _, _ := strings.Cut(entry, ":")
			if name != "" {
				if err := q.rdb.PExpire(ctx, q.base(name)+":r:"+id, keepMS(keep)).Err(); err != nil {
					return err
				}
			}
			if err := q.rdb.LRem(ctx, bb+":rl", 1, entry).Err(); err != nil {
				return err
			}
		}
		if len(v) < 3*memberChunk {
			return nil
		}
	}
}

// keepMS reads a result's retention in ms, at least one.
func keepMS(keep string) time.Duration {
	ms, err := strconv.ParseInt(keep, 10, 64)
	if err != nil || ms <= 0 {
		ms = 1
	}
	return time.Duration(ms) * time.Millisecond
}

// pushCallback pushes batch bid's callback job j for ev, once whatever the
// retries (pushOnceScript).
func (q *Queue) pushCallback(ctx context.Context, bid string, ev driver.BatchEvent, j queue.Job) error {
	if j.ID == "" {
		j.ID = driver.NewID()
	}
	if err := driver.Validate(j); err != nil {
		q.log.Warn("redisqueue: a batch callback that cannot be pushed dropped", "batch", bid, "event", ev, "err", err)
		return nil
	}
	b := q.base(j.QueueName())
	if err := q.register(ctx, j.QueueName()); err != nil {
		return err
	}
	ks := newKeyset(q.idsKey(b), q.qsetKey(b))
	args, err := q.pushArgs([]any{q.wake, bid + ":" + string(ev)}, ks, &j)
	if err != nil {
		return err
	}
	args = append(args, batchRetention.Milliseconds())
	return pushOnceScript.Run(ctx, q.rdb, ks.keys, args...).Err()
}

// cancelMembers cancels the pending members of batch bid, a chunk at a
// time: each queue's members in one script of the queue's slot (step 1),
// then that queue's outbox settled. It stops when none is left or a round
// cancels none (a member that is dead, or gone to another queue, is left
// to its own events).
func (q *Queue) cancelMembers(ctx context.Context, bid string) error {
	bb := q.batchBase(bid)
	for {
		pairs, err := pendingMembersScript.Run(ctx, q.rdb, []string{bb}, memberChunk).StringSlice()
		if err != nil || len(pairs) == 0 {
			return err
		}
		byQueue := map[string][]any{}
		var names []string
		for i := 0; i+1 < len(pairs); i += 2 {
			if byQueue[pairs[i+1]] == nil {
				names = append(names, pairs[i+1])
				byQueue[pairs[i+1]] = []any{bid, time.Now().UnixMilli(), cancelKeep.Milliseconds(), cancelLogCap}
			}
			byQueue[pairs[i+1]] = append(byQueue[pairs[i+1]], pairs[i])
		}
		noted := 0
		for _, n := range names {
			k, err := cancelMembersScript.Run(ctx, q.rdb, []string{q.idsKey(q.base(n)), q.base(n), q.clogKey(q.base(n))}, byQueue[n]...).Int()
			if err != nil {
				return err
			}
			noted += k
		}
		if err := q.batchSweep.step("members-cancelled"); err != nil {
			return err
		}
		for _, n := range names {
			if err := q.settleQueue(ctx, n, bb); err != nil {
				return err
			}
		}
		if noted == 0 {
			return nil
		}
	}
}
