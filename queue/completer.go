package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/queue/internal/retry"
)

// maxAckBatch caps how many acks one flush sends.
const maxAckBatch = 1000

// ackFlushers is how many ack flushes may be in flight at once.
const ackFlushers = 2

// completer is the part of a run that records outcomes (River's job
// completer): every outcome of a handler — done, retried, dead, snoozed,
// cancelled, a chain's next step, a batch member finished — goes to the
// store through the queue's one batched call, Complete, flushed with the
// start marks of prefetched jobs; and each recorded outcome is reported to
// the observer, the driver's metrics and OnFailed.
type completer struct {
	q        Queue
	runObs   driver.Reporter // nil: the store keeps no metrics
	tags     *tagWatch       // nil: the store monitors no tags
	ctx      context.Context
	leases   *heldLeases
	halt     *halt
	observe  func(EventKind, *Job, error, time.Duration)
	onFailed func(Job, error)
	log      *slog.Logger
	// maxAttempts is the attempt limit the Worker applies to a job,
	// stored with its dead letter; nil: none stored.
	maxAttempts func(*Job) int
	// resultKeep is how long a result is kept after its job's ack.
	resultKeep time.Duration

	acks *ackQueue
	done chan struct{} // closed when the flushers have finished
	// gathering is held (a token in it) by the flusher that takes the
	// next batch from acks, so only one lingers for more at a time. A
	// channel, not a mutex, so that a flusher waiting for it is durably
	// blocked (testing/synctest).
	gathering chan struct{}
	// marked wakes a lingering flusher when a start mark is queued.
	marked chan struct{}
	// marks holds idle *startReq for markStart, so that a mark costs no
	// allocation: a request and its channel are reused by the next job.
	marks sync.Pool
}

// ackItem is one job waiting for a flush: its outcome, or, when mark is
// set, the start mark of its attempt (the flush counts the attempt and
// answers in mark before the handler runs).
type ackItem struct {
	j     *Job
	start time.Time
	rt    time.Duration
	mark  *startReq
	// out is the outcome to record; cause is the handler's error behind
	// it (for the observer, the logs and OnFailed).
	out   driver.Completion
	cause error
	// plain: out.Reason is plainReason(cause) already (a store refused
	// the full text).
	plain bool
}

// start starts the flushers; buffer is how many outcomes may wait.
func (c *completer) start(buffer int) {
	c.acks = newAckQueue(buffer)
	c.done = make(chan struct{})
	c.marked = make(chan struct{}, 1)
	c.gathering = make(chan struct{}, 1)
	// Two flushers, so one batch is sent while the next gathers and a slow
	// flush does not stall the handlers behind a full buffer.
	var flushers sync.WaitGroup
	for range ackFlushers {
		flushers.Go(c.ackLoop)
	}
	go func() { flushers.Wait(); close(c.done) }()
}

// close flushes the outcomes that wait and stops the flushers. Later
// outcomes are sent one by one. A completer never started has nothing to
// flush.
func (c *completer) close() {
	if c.acks == nil {
		return
	}
	c.acks.close()
	<-c.done
}

// markStart counts the attempt of the prefetched job j in the next ack
// flush and waits for it, reporting whether the lease was lost or the call
// failed (then no attempt is known to be counted). queued is false when
// the completer sends no flushes (not started, or closed): the caller
// counts the attempt itself.
func (c *completer) markStart(j *Job) (lost bool, err error, queued bool) {
	if c.acks == nil {
		return false, nil, false
	}
	r, _ := c.marks.Get().(*startReq)
	if r == nil {
		r = &startReq{done: make(chan struct{}, 1)}
	}
	r.l = j.Lease()
	if !c.acks.put(ackItem{j: j, mark: r}) {
		c.marks.Put(r)
		return false, nil, false
	}
	select {
	case c.marked <- struct{}{}:
	default: // a wake-up is pending already
	}
	<-r.done
	lost, err = r.lost, r.err
	// The flush answered r and no longer looks at it: it may serve the
	// next mark.
	*r = startReq{done: r.done}
	c.marks.Put(r)
	return lost, err, true
}

// ack records that j's handler succeeded: j is acked, with the next step
// of its chain pushed with it, its result (nil: none) stored with it, and
// counted done in its batch.
func (c *completer) ack(j *Job, start time.Time, rt time.Duration, result []byte) {
	out := driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone, Batch: j.Meta[MetaBatch], Graph: j.Meta[driver.MetaGraph]}
	out.Sequence, out.ReleaseOnDead = driver.SequenceOf(*j)
	if result != nil {
		out.Result, out.ResultUntil = result, time.Now().Add(c.resultKeep)
	}
	// A batch step's chain goes on from its batch's Then (runBatchStep).
	if _, ok := j.Meta[MetaChain]; ok && !isBatchStep(j) {
		rest, _, err := chainOf(j)
		if err == nil {
			out.Push, err = rest.next(j.ID)
		}
		if err != nil {
			c.fail(j, Permanent(err), start, rt)
			return
		}
		if out.Batch != "" {
			// A chain in a batch: its next step is a member too, added
			// to the batch with this ack (see Completion).
			for i := range out.Push {
				out.Push[i].Meta[MetaBatch] = out.Batch
			}
		}
	}
	c.submit(ackItem{j: j, start: start, rt: rt, out: out})
}

// nack releases j for another attempt at at, its handler having failed
// with cause.
func (c *completer) nack(j *Job, cause error, at time.Time, start time.Time, rt time.Duration) {
	c.submit(ackItem{j: j, start: start, rt: rt, cause: cause,
		out: driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeRetried, At: at, Reason: reason(cause)}})
}

// snooze puts j back at the time its handler's Snooze result asked for,
// giving its attempt back.
func (c *completer) snooze(j *Job, result error, start time.Time, rt time.Duration) {
	var se *snoozeError
	errors.As(result, &se)
	c.submit(ackItem{j: j, start: start, rt: rt,
		out: driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeSnoozed, At: time.Now().Add(se.d), Counted: se.counted}})
}

// giveBack releases j, which did not run, until at with the attempt its
// claim counted given back (an uncounted snooze); cause says why, for the
// logs.
func (c *completer) giveBack(j *Job, cause error, at time.Time) {
	c.submit(ackItem{j: j, start: time.Now(), cause: cause,
		out: driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeSnoozed, At: at}})
}

// cancel ends j as cancelled at its handler's request (a Cancel result),
// counted cancelled in its batch.
func (c *completer) cancel(j *Job, cause error, start time.Time, rt time.Duration) {
	out := driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeCancelled, Batch: j.Meta[MetaBatch], Graph: j.Meta[driver.MetaGraph]}
	out.Sequence, out.ReleaseOnDead = driver.SequenceOf(*j)
	c.submit(ackItem{j: j, start: start, rt: rt, cause: cause, out: out})
}

// cancelled records that j ended as cancelled (in the store already).
func (c *completer) cancelled(j *Job, cause error, start time.Time, rt time.Duration) {
	c.leases.remove(j.Lease())
	c.log.Info("queue: job cancelled", "job", j.ID, "name", j.Name, "cause", cause)
	c.finished(j, driver.OutcomeCancelled, cause, start, rt)
}

// fail dead-letters j, its handler having failed with cause for good: with
// its chain's catch job pushed with it, and counted failed in its batch.
func (c *completer) fail(j *Job, cause error, start time.Time, rt time.Duration) {
	out := driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeFailed, Reason: reason(cause), Batch: j.Meta[MetaBatch], Graph: j.Meta[driver.MetaGraph]}
	out.Sequence, out.ReleaseOnDead = driver.SequenceOf(*j)
	if c.maxAttempts != nil {
		// The limit that applied is stored with the dead letter: the
		// job page shows it after this worker has gone.
		out.MaxAttempts = c.maxAttempts(j)
	}
	if rest, ok, err := chainOf(j); ok && err == nil && rest.Catch != nil {
		out.Push = rest.caught(j, out.Reason)
	}
	c.submit(ackItem{j: j, start: start, rt: rt, cause: cause, out: out})
}

// submit queues it for the next flush, or, once the flushers have
// stopped, records it at once.
func (c *completer) submit(it ackItem) {
	if c.acks != nil && c.acks.put(it) {
		return
	}
	b := ackBatch{acks: []ackItem{it}}
	c.flush(&b)
}

// recorded reports it, whose outcome the store recorded, to the logs, the
// observer, the driver's metrics and OnFailed.
func (c *completer) recorded(it ackItem) {
	j := it.j
	switch it.out.Outcome {
	case driver.OutcomeDone:
		c.finished(j, driver.OutcomeDone, nil, it.start, it.rt)
	case driver.OutcomeRetried:
		c.log.Debug("queue: job failed; retrying", "job", j.ID, "name", j.Name, "attempt", j.Attempts, "retry_at", it.out.At, "err", it.cause)
		c.finished(j, driver.OutcomeRetried, it.cause, it.start, it.rt)
	case driver.OutcomeSnoozed:
		c.log.Debug("queue: job snoozed", "job", j.ID, "name", j.Name, "until", it.out.At, "counted", it.out.Counted, "cause", it.cause)
		c.finished(j, driver.OutcomeSnoozed, nil, it.start, it.rt)
	case driver.OutcomeCancelled:
		c.cancelled(j, it.cause, it.start, it.rt)
	case driver.OutcomeFailed:
		c.log.Warn("queue: job dead-lettered", "job", j.ID, "name", j.Name, "attempts", j.Attempts, "err", it.cause)
		c.finished(j, driver.OutcomeFailed, it.cause, it.start, it.rt)
		if c.onFailed != nil {
			dead := *j // the handler may still hold j if it was abandoned
			dead.LastError = it.out.Reason
			c.onFailed(dead, it.cause)
		}
	}
}

// doing names what recording o does, for the logs.
func doing(o driver.Outcome) string {
	switch o {
	case driver.OutcomeRetried:
		return "nacking"
	case driver.OutcomeFailed:
		return "dead-lettering"
	case driver.OutcomeCancelled:
		return "cancelling"
	case driver.OutcomeSnoozed:
		return "snoozing"
	}
	return "acking"
}

// unrecorded logs that the outcome of it was not recorded (its error err):
// the job runs again, now if its lease was lost, else when it expires.
func (c *completer) unrecorded(it ackItem, err error) {
	j, what := it.j, doing(it.out.Outcome)
	if errors.Is(err, ErrLeaseLost) {
		c.observe(EventLeaseLost, j, err, it.rt)
		c.log.Warn("queue: "+what+" job after its lease was lost; it will run again", "job", j.ID, "name", j.Name)
		return
	}
	c.halt.check(what+" a job", err)
	c.log.Error("queue: "+what+" job; it will be delivered again when its lease expires", "job", j.ID, "name", j.Name, "err", err)
}

// finished reports a recorded outcome to the observer and the driver's
// metrics.
func (c *completer) finished(j *Job, o driver.Outcome, cause error, start time.Time, rt time.Duration) {
	kind := EventDone
	switch o {
	case driver.OutcomeRetried:
		kind = EventRetried
	case driver.OutcomeFailed:
		kind = EventFailed
	case driver.OutcomeCancelled:
		kind = EventCancelled
	case driver.OutcomeSnoozed:
		kind = EventSnoozed
	}
	c.observe(kind, j, cause, rt)
	if c.tags != nil && o != driver.OutcomeSnoozed {
		c.tags.note(j, o, cause, start.Add(rt))
	}
	// The stores' per-minute metrics count attempts that succeeded or
	// failed; a snooze gave its attempt back and a cancel is neither.
	if c.runObs != nil && (o == driver.OutcomeDone || o == driver.OutcomeRetried || o == driver.OutcomeFailed) {
		avail := j.AvailableAt
		if avail.IsZero() {
			avail = j.CreatedAt
		}
		wait := time.Duration(0)
		if !avail.IsZero() && start.After(avail) {
			wait = start.Sub(avail)
		}
		c.runObs.ObserveRun(driver.RunRecord{Queue: j.QueueName(), Name: j.Name, Start: start, Runtime: rt, Wait: wait, Outcome: o, Attempts: j.Attempts})
	}
}

// ackLinger is how long a batch of acks with no start mark in it waits
// for more before it is sent: at low load acks then share commits instead
// of each costing a commit and a WAL flush of its own. A start mark ends the
// wait at once, since its handler waits for it; an ack has no waiter (the
// handler has returned), so the wait delays only when the store records
// the job done.
const ackLinger = 5 * time.Millisecond

// lingerPoll is how often a lingering flusher looks whether enough acks
// have queued to send them; acks queue meanwhile without waking it.
const lingerPoll = time.Millisecond

// ackBatch is one flush's worth of items, split as they are gathered into
// start marks and acks. Each flusher reuses its own from flush to flush, so
// a flush allocates nothing per job.
type ackBatch struct {
	marks []ackItem
	acks  []ackItem
}

// add appends it to the marks or the acks.
func (b *ackBatch) add(it ackItem) {
	if it.mark != nil {
		b.marks = append(b.marks, it)
	} else {
		b.acks = append(b.acks, it)
	}
}

// len reports how many items b holds.
func (b *ackBatch) len() int { return len(b.marks) + len(b.acks) }

// reset empties b for the next batch, keeping its memory but not the jobs
// it referred to.
func (b *ackBatch) reset() {
	clear(b.marks)
	clear(b.acks)
	b.marks, b.acks = b.marks[:0], b.acks[:0]
}

// ackLoop collects acks and start marks and flushes them in batches until
// the ack queue is closed: it takes whatever has queued up while the
// previous flush ran, so batches grow with load, and a batch of acks alone
// lingers (ackLinger) for more.
func (c *completer) ackLoop() {
	var b ackBatch
	for {
		c.gathering <- struct{}{}
		open := c.gather(&b)
		<-c.gathering
		if b.len() > 0 {
			c.flush(&b)
		}
		b.reset()
		if !open {
			return
		}
	}
}

// gather takes the next batch into the empty b; open is false once the
// queue is closed and empty.
func (c *completer) gather(b *ackBatch) (open bool) {
	for {
		took, open := c.acks.take(b, maxAckBatch)
		if !open {
			return false
		}
		if took > 0 {
			break
		}
		select {
		case <-c.acks.ready:
		case <-c.acks.shut:
		}
	}
	if len(b.marks) > 0 || b.len() >= maxAckBatch {
		return true
	}
	deadline := time.NewTimer(ackLinger)
	defer deadline.Stop()
	poll := time.NewTicker(lingerPoll)
	defer poll.Stop()
	for len(b.marks) == 0 && b.len() < maxAckBatch && c.acks.len() < c.acks.max/2 {
		final := false
		select {
		case <-c.marked:
		case <-poll.C:
		case <-deadline.C:
			final = true
		}
		if _, open := c.acks.take(b, maxAckBatch-b.len()); !open || final {
			return open
		}
	}
	return true
}

// flush writes a batch: its start marks and its outcomes in one Complete
// call, answering the marks; a call that failed as a whole is sent again
// with the outcomes alone while their leases hold. The marks are not sent
// again, so that a call whose outcome is unknown never counts an attempt
// twice (a failed mark releases its job uncounted, see executor.start).
// The extender keeps the leases alive meanwhile, since the jobs stay held
// until flushed. An outcome whose reason text the store refused is sent
// once more with a plain one.
func (c *completer) flush(b *ackBatch) {
	marks, items := b.marks, b.acks
	// The leases and outcomes go to the driver, which may keep them (the
	// slices are not reused).
	starts := make([]driver.Lease, len(marks))
	for i, it := range marks {
		starts[i] = it.mark.l
	}
	outs := make([]driver.Completion, len(items))
	leases := make([]driver.Lease, len(items))
	for i, it := range items {
		outs[i], leases[i] = it.out, it.out.Lease
	}
	// unknown: a call failed in a way that leaves its outcome open (the
	// connection broke around the commit), so a later call may find jobs
	// that call already completed and report them lost.
	unknown := false
	fails := streak{log: c.log, doing: "flushing outcomes", level: slog.LevelWarn}
	lostStarts, errs, err := c.q.Complete(c.ctx, starts, outs)
	if len(marks) > 0 {
		gone := make(map[driver.Lease]bool, len(lostStarts))
		for _, l := range lostStarts {
			gone[l] = true
		}
		for _, it := range marks {
			it.mark.lost, it.mark.err = gone[it.mark.l], err
			it.mark.done <- struct{}{} // the last use of it.mark: its waiter may reuse it
		}
	}
	if len(items) == 0 {
		return
	}
	if err != nil {
		unknown = !errors.Is(err, ErrLeaseLost)
		fails.failed(err, "jobs", len(items))
		err = retry.Call(c.ctx, retry.Backoff{Initial: 10 * time.Millisecond, Max: time.Second},
			func(err error) bool {
				return !errors.Is(err, ErrConfig) && c.leases.anyHold(leases, time.Now())
			},
			func(ctx context.Context) error {
				var err error
				_, errs, err = c.q.Complete(ctx, nil, outs)
				if err != nil {
					unknown = unknown || !errors.Is(err, ErrLeaseLost)
					fails.failed(err, "jobs", len(items))
				}
				return err
			})
	}
	if err == nil && len(errs) != len(outs) {
		err = fmt.Errorf("queue: the driver answered %d of %d outcomes", len(errs), len(outs))
	}
	if err != nil {
		c.halt.check("recording outcomes", err)
		c.log.Error("queue: flushing outcomes failed and the leases ran out; these jobs will run again", "jobs", len(items), "err", err)
		c.leases.removeJobs(items)
		return
	}
	fails.ok()
	c.leases.removeJobs(items)
	var again []ackItem
	for i, it := range items {
		switch e := errs[i]; {
		case e == nil:
			c.recorded(it)
		case errors.Is(e, ErrLeaseLost) && unknown && it.out.Outcome == driver.OutcomeDone && c.finishedInStore(it.j.ID):
			c.recorded(it) // acked by the call whose outcome was unknown
		case !it.plain && it.cause != nil && it.out.Reason != "" && storeRejected(e):
			c.log.Warn("queue: "+doing(it.out.Outcome)+" job with its error text failed; retrying with a plain text", "job", it.j.ID, "err", e)
			it.out.Reason, it.plain = plainReason(it.cause), true
			again = append(again, it)
		default:
			c.unrecorded(it, e)
		}
	}
	if len(again) > 0 {
		c.flush(&ackBatch{acks: again})
	}
}

// finishedInStore reports whether the store holds job id as done, or no
// longer holds it (acked and pruned), read through the queue's Inspector:
// after a flush whose outcome was unknown, a job the retry finds lost may
// have been acked by the call that failed, and then it will not run again.
// Without an Inspector, or when the read fails, it reports false and the
// ack counts as lost, as before.
func (c *completer) finishedInStore(id string) bool {
	in := driver.CapabilitiesOf(c.q).Inspector
	if in == nil {
		return false
	}
	info, err := in.GetJob(c.ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return true
	case err != nil:
		c.log.Warn("queue: re-checking an ack whose outcome was unknown", "job", id, "err", err)
		return false
	}
	return info.State == StateDone
}

// maxReason caps the bytes of error text stored with a job.
const maxReason = 16 << 10

// truncatedMark ends a reason cut to maxReason.
const truncatedMark = "…(truncated)"

// reason is the text stored for a failed attempt: err's message as valid
// UTF-8 without NUL bytes (which SQL text columns reject), cut on a
// character boundary to at most maxReason bytes.
func reason(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason - len(truncatedMark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMark
}

// storeRejected reports whether a Nack or Fail error may come from the
// reason text (a database refusing it) rather than from the lease, the
// configuration or the context, so that a plain reason is worth a try.
func storeRejected(err error) bool {
	return err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrConfig) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// maxPlainReason caps the fallback reason.
const maxPlainReason = 512

// plainReason is the fallback text stored when a driver refused reason(err):
// printable ASCII only, at most maxPlainReason bytes, so any text column
// takes it.
func plainReason(err error) string {
	const prefix = "queue: the error text could not be stored; its printable ASCII start: "
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range err.Error() {
		if b.Len() >= maxPlainReason {
			break
		}
		switch {
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r == '\n' || r == '\t':
			b.WriteByte(' ')
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// ackQueue is where executors leave acks and start marks for the ack
// flushers: a slice under a mutex that a flusher empties a batch at a time,
// rather than a channel, whose lock every item took twice (its send and its
// receive) while 1,000 executors and two flushers contended for it. Only
// the wake-ups are channels, so that a flusher or an executor waiting here
// is durably blocked (testing/synctest).
type ackQueue struct {
	max int // items at which put waits for a flusher to take some

	mu     sync.Mutex
	items  []ackItem
	closed bool
	// taken, while a put waits for room, is closed (and cleared) when a
	// flusher takes items.
	taken chan struct{}

	ready chan struct{} // holds a token while items may wait for a flusher
	shut  chan struct{} // closed by close
}

func newAckQueue(max int) *ackQueue {
	return &ackQueue{max: max, ready: make(chan struct{}, 1), shut: make(chan struct{})}
}

// put queues it, waiting while the queue holds max items. It reports false,
// queueing nothing, once the queue is closed.
func (q *ackQueue) put(it ackItem) bool {
	q.mu.Lock()
	for len(q.items) >= q.max && !q.closed {
		if q.taken == nil {
			q.taken = make(chan struct{})
		}
		taken := q.taken
		q.mu.Unlock()
		<-taken
		q.mu.Lock()
	}
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	q.signal()
	return true
}

// signal leaves a token in ready unless one is there.
func (q *ackQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take moves up to n queued items, oldest first, into b and reports how
// many; open is false once the queue is closed and holds nothing more.
func (q *ackQueue) take(b *ackBatch, n int) (took int, open bool) {
	q.mu.Lock()
	k := min(n, len(q.items))
	for _, it := range q.items[:k] {
		b.add(it)
	}
	rest := copy(q.items, q.items[k:])
	clear(q.items[rest:]) // let the jobs taken be collected once flushed
	q.items = q.items[:rest]
	if k > 0 && q.taken != nil {
		close(q.taken)
		q.taken = nil
	}
	open = !q.closed || rest > 0
	q.mu.Unlock()
	if rest > 0 {
		q.signal() // for the next gather
	}
	return k, open
}

// len reports how many items wait.
func (q *ackQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// close makes later puts fail and wakes every waiter; the items queued
// stay for the flushers to take.
func (q *ackQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	close(q.shut)
	if q.taken != nil {
		close(q.taken)
		q.taken = nil
	}
}
