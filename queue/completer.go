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

	"github.com/meridianjobs/meridian/queue/internal/retry"
)

// maxAckBatch caps how many acks one flush sends.
const maxAckBatch = 1000

// ackFlushers is how many ack flushes may be in flight at once.
const ackFlushers = 2

// completer is the part of a run that records outcomes (River's job
// completer): it acks, nacks and fails jobs, batching acks through the
// queue's BatchAcker when it has one, and reports each recorded outcome to
// the observer, the driver's metrics and OnFailed.
type completer struct {
	q        Queue
	acker    BatchAcker  // nil: ack one by one
	runObs   RunObserver // nil: the driver keeps no metrics
	ctx      context.Context
	leases   *heldLeases
	halt     *halt
	observe  func(EventKind, *Job, error, time.Duration)
	onFailed func(Job, error)
	// snoozer and canceller are the queue's optional abilities, nil when
	// it lacks them.
	snoozer   Snoozer
	canceller Canceller
	// chainer records a chain step's outcome and pushes what follows in
	// one step; nil when the queue lacks it.
	chainer Chainer
	// batcher records a batch member's outcome in its batch; nil when
	// the queue lacks it.
	batcher Batcher
	// starter counts the attempts of prefetched jobs, in the ack flushes
	// when acks are batched; startAcker is the same queue when it can
	// count and ack in one transaction. Both nil when the queue is no
	// Starter.
	starter    Starter
	startAcker StartAcker
	log        *slog.Logger

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

// ackItem is one job waiting for an ack flush: its ack, or, when mark is
// set, the start mark of its attempt (the flush counts the attempt and
// answers in mark before the handler runs).
type ackItem struct {
	j     *Job
	start time.Time
	rt    time.Duration
	mark  *startReq
}

// start starts the ack flushers; buffer is how many acks may wait.
func (c *completer) start(buffer int) {
	c.acks = newAckQueue(buffer)
	c.done = make(chan struct{})
	if c.acker == nil {
		close(c.done)
		return
	}
	c.marked = make(chan struct{}, 1)
	c.gathering = make(chan struct{}, 1)
	// Two flushers, so one batch is sent while the next gathers and a slow
	// flush does not stall the handlers behind a full ack buffer.
	var flushers sync.WaitGroup
	for range ackFlushers {
		flushers.Go(c.ackLoop)
	}
	go func() { flushers.Wait(); close(c.done) }()
}

// close flushes the acks that wait and stops the flushers. Later acks are
// sent one by one.
func (c *completer) close() {
	c.acks.close()
	<-c.done
}

// markStart counts the attempt of the prefetched job j in the next ack
// flush and waits for it, reporting whether the lease was lost or the call
// failed (then no attempt is known to be counted). queued is false when
// the completer sends no flushes (acks one by one, or closed, or the queue
// is no Starter): the caller counts the attempt itself.
func (c *completer) markStart(j *Job) (lost bool, err error, queued bool) {
	if c.acker == nil || c.starter == nil {
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

func (c *completer) ack(j *Job, start time.Time, rt time.Duration) {
	if b := j.Meta[MetaBatch]; b != "" && c.batcher != nil {
		if c.settled(j, c.batcher.FinishMember(c.ctx, j.Lease(), b, OutcomeDone, ""), "acking a batch member", rt) {
			c.finished(j, OutcomeDone, nil, start, rt)
		}
		return
	}
	if _, ok := j.Meta[MetaChain]; ok {
		c.ackChain(j, start, rt)
		return
	}
	if c.acker != nil && c.acks.put(ackItem{j: j, start: start, rt: rt}) {
		return
	}
	if c.settled(j, c.q.Ack(c.ctx, j.Lease()), "acking", rt) {
		c.finished(j, OutcomeDone, nil, start, rt)
	}
}

// ackChain acks a chain step and pushes the step after it in one step
// (Chainer), or pushes it and then acks where the queue has no Chainer.
func (c *completer) ackChain(j *Job, start time.Time, rt time.Duration) {
	rest, _, err := chainOf(j)
	var next []Job
	if err == nil {
		next, err = rest.next()
	}
	if err != nil {
		c.fail(j, Permanent(err), start, rt)
		return
	}
	if c.chainer != nil {
		err = c.chainer.AckPush(c.ctx, j.Lease(), next)
	} else {
		if _, err = PushMany(c.ctx, c.q, next); err == nil {
			err = c.q.Ack(c.ctx, j.Lease())
		}
	}
	if c.settled(j, err, "acking a chain step", rt) {
		c.finished(j, OutcomeDone, nil, start, rt)
	}
}

// dead dead-letters j with text as its error, pushing the chain's catch job
// with it when j is a chain step that has one, and recording the failure in
// its batch when j is a batch member.
func (c *completer) dead(j *Job, text string) error {
	if b := j.Meta[MetaBatch]; b != "" && c.batcher != nil {
		return c.batcher.FinishMember(c.ctx, j.Lease(), b, OutcomeFailed, text)
	}
	rest, ok, err := chainOf(j)
	if !ok || err != nil || rest.Catch == nil {
		return c.q.Fail(c.ctx, j.Lease(), text)
	}
	catch := rest.caught(j, text)
	if c.chainer != nil {
		return c.chainer.FailPush(c.ctx, j.Lease(), text, catch)
	}
	if err := c.q.Fail(c.ctx, j.Lease(), text); err != nil {
		return err
	}
	_, err = PushMany(c.ctx, c.q, catch)
	return err
}

func (c *completer) nack(j *Job, cause error, at time.Time, start time.Time, rt time.Duration) {
	err := c.q.Nack(c.ctx, j.Lease(), at, reason(cause))
	if storeRejected(err) {
		c.log.Warn("queue: nacking job with its error text failed; retrying with a plain text", "job", j.ID, "err", err)
		err = c.q.Nack(c.ctx, j.Lease(), at, plainReason(cause))
	}
	if c.settled(j, err, "nacking", rt) {
		c.log.Debug("queue: job failed; retrying", "job", j.ID, "name", j.Name, "attempt", j.Attempts, "retry_at", at, "err", cause)
		c.finished(j, OutcomeRetried, cause, start, rt)
	}
}

// snooze puts j back at the time its handler's Snooze result asked for,
// giving its attempt back.
func (c *completer) snooze(j *Job, result error, start time.Time, rt time.Duration) {
	var se *snoozeError
	errors.As(result, &se)
	at := time.Now().Add(se.d)
	if c.settled(j, c.snoozer.Snooze(c.ctx, j.Lease(), at, se.counted), "snoozing", rt) {
		c.log.Debug("queue: job snoozed", "job", j.ID, "name", j.Name, "until", at, "counted", se.counted)
		c.finished(j, OutcomeSnoozed, nil, start, rt)
	}
}

// cancel ends j as cancelled at its handler's request (a Cancel result):
// through the driver's Cancel, or as a dead letter where it has none.
func (c *completer) cancel(j *Job, cause error, start time.Time, rt time.Duration) {
	if b := j.Meta[MetaBatch]; b != "" && c.batcher != nil {
		if c.settled(j, c.batcher.FinishMember(c.ctx, j.Lease(), b, OutcomeCancelled, ""), "cancelling a batch member", rt) {
			c.cancelled(j, cause, start, rt)
		}
		return
	}
	if c.canceller == nil {
		c.fail(j, cause, start, rt)
		return
	}
	_, err := c.canceller.Cancel(c.ctx, j.ID)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrFinished) {
		err = fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	if c.settled(j, err, "cancelling", rt) {
		c.cancelled(j, cause, start, rt)
	}
}

// cancelled records that j ended as cancelled (in the store already).
func (c *completer) cancelled(j *Job, cause error, start time.Time, rt time.Duration) {
	c.leases.remove(j.ID)
	c.log.Info("queue: job cancelled", "job", j.ID, "name", j.Name, "cause", cause)
	c.finished(j, OutcomeCancelled, cause, start, rt)
}

func (c *completer) fail(j *Job, cause error, start time.Time, rt time.Duration) {
	err := c.dead(j, reason(cause))
	if storeRejected(err) {
		c.log.Warn("queue: dead-lettering job with its error text failed; retrying with a plain text", "job", j.ID, "err", err)
		err = c.dead(j, plainReason(cause))
	}
	if !c.settled(j, err, "dead-lettering", rt) {
		return
	}
	c.log.Warn("queue: job dead-lettered", "job", j.ID, "name", j.Name, "attempts", j.Attempts, "err", cause)
	c.finished(j, OutcomeFailed, cause, start, rt)
	if c.onFailed != nil {
		dead := *j // the handler may still hold j if it was abandoned
		dead.LastError = reason(cause)
		c.onFailed(dead, cause)
	}
}

// settled stops holding j after an ack, nack or fail (doing names which)
// returned err, logs a failure, and reports whether the call took effect.
func (c *completer) settled(j *Job, err error, doing string, rt time.Duration) bool {
	c.leases.remove(j.ID)
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrLeaseLost):
		c.observe(EventLeaseLost, j, err, rt)
		c.log.Warn("queue: "+doing+" job after its lease was lost; it will run again", "job", j.ID, "name", j.Name)
	default:
		c.halt.check(doing+" a job", err)
		c.log.Error("queue: "+doing+" job; it will be delivered again when its lease expires", "job", j.ID, "name", j.Name, "err", err)
	}
	return false
}

// finished reports a recorded outcome to the observer and the driver's
// metrics.
func (c *completer) finished(j *Job, o Outcome, cause error, start time.Time, rt time.Duration) {
	kind := EventDone
	switch o {
	case OutcomeRetried:
		kind = EventRetried
	case OutcomeFailed:
		kind = EventFailed
	case OutcomeCancelled:
		kind = EventCancelled
	case OutcomeSnoozed:
		kind = EventSnoozed
	}
	c.observe(kind, j, cause, rt)
	// The stores' per-minute metrics count attempts that succeeded or
	// failed; a snooze gave its attempt back and a cancel is neither.
	if c.runObs != nil && (o == OutcomeDone || o == OutcomeRetried || o == OutcomeFailed) {
		avail := j.AvailableAt
		if avail.IsZero() {
			avail = j.CreatedAt
		}
		wait := time.Duration(0)
		if !avail.IsZero() && start.After(avail) {
			wait = start.Sub(avail)
		}
		c.runObs.ObserveRun(RunRecord{Queue: j.QueueName(), Name: j.Name, Start: start, Runtime: rt, Wait: wait, Outcome: o, Attempts: j.Attempts})
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

// flush writes a batch: the start marks in it, then its acks, retrying a
// failed ack call while the leases hold. With a StartAcker the marks and
// the acks go in one call (one transaction); the marks are not retried, so
// that a call whose outcome is unknown never counts an attempt twice (a
// failed mark releases its job uncounted, see executor.start). The extender
// keeps the leases alive meanwhile, since the jobs stay held until flushed.
func (c *completer) flush(b *ackBatch) {
	marks, batch := b.marks, b.acks
	// The leases go to the driver, which may keep them (the slice is not
	// reused); the marks' and the acks' in one allocation.
	all := make([]Lease, len(marks)+len(batch))
	ml, leases := all[:len(marks):len(marks)], all[len(marks):]
	for i, it := range marks {
		ml[i] = it.mark.l
	}
	for i, it := range batch {
		leases[i] = it.j.Lease()
	}
	var lost []Lease
	// unknown: a call failed in a way that leaves its outcome open (the
	// connection broke around the commit), so a later call may find jobs
	// that call already acked and report them lost.
	unknown := false
	fails := streak{log: c.log, doing: "flushing acks", level: slog.LevelWarn}
	acked := false // the marks' call acked the batch too
	if len(marks) > 0 {
		var err error
		acked, lost, err = c.flushMarks(marks, ml, leases)
		if err != nil && len(leases) > 0 && c.startAcker != nil {
			unknown = !errors.Is(err, ErrLeaseLost)
			fails.failed(err, "jobs", len(leases))
		}
	}
	if len(batch) == 0 {
		return
	}
	var err error
	if !acked {
		err = retry.Call(c.ctx, retry.Backoff{Initial: 10 * time.Millisecond, Max: time.Second},
			func(err error) bool {
				return !errors.Is(err, ErrConfig) && c.leases.anyHold(leases, time.Now())
			},
			func(ctx context.Context) error {
				var err error
				lost, err = c.acker.AckMany(ctx, leases)
				if err != nil {
					unknown = unknown || !errors.Is(err, ErrLeaseLost)
					fails.failed(err, "jobs", len(leases))
				}
				return err
			})
	}
	if err != nil {
		c.halt.check("acking jobs", err)
		c.log.Error("queue: flushing acks failed and the leases ran out; these jobs will run again", "jobs", len(leases), "err", err)
		c.leases.removeJobs(batch)
		return
	}
	fails.ok()
	lostSet := make(map[string]bool, len(lost))
	for _, l := range lost {
		lostSet[l.JobID] = true
	}
	c.leases.removeJobs(batch)
	for _, it := range batch {
		if lostSet[it.j.ID] && !(unknown && c.finishedInStore(it.j.ID)) {
			c.observe(EventLeaseLost, it.j, ErrLeaseLost, it.rt)
			c.log.Warn("queue: ack after the lease was lost; the job will run again", "job", it.j.ID, "name", it.j.Name)
			continue
		}
		c.finished(it.j, OutcomeDone, nil, it.start, it.rt)
	}
}

// flushMarks counts the attempts of the jobs of marks (their leases ml) in
// one call, with the acks of leases when the queue is a StartAcker (acked: that call
// succeeded, and lost lists the acks that were not current), and answers
// every mark.
func (c *completer) flushMarks(marks []ackItem, ml, leases []Lease) (acked bool, lost []Lease, err error) {
	var lostStarts []Lease
	if c.startAcker != nil && len(leases) > 0 {
		lostStarts, lost, err = c.startAcker.StartAck(c.ctx, ml, leases)
	} else {
		lostStarts, err = c.starter.Start(c.ctx, ml)
	}
	gone := make(map[Lease]bool, len(lostStarts))
	for _, l := range lostStarts {
		gone[l] = true
	}
	for _, it := range marks {
		it.mark.lost, it.mark.err = gone[it.mark.l], err
		it.mark.done <- struct{}{} // the last use of it.mark: its waiter may reuse it
	}
	return err == nil && c.startAcker != nil && len(leases) > 0, lost, err
}

// finishedInStore reports whether the store holds job id as done, or no
// longer holds it (acked and pruned), read through the queue's Inspector:
// after a flush whose outcome was unknown, a job the retry finds lost may
// have been acked by the call that failed, and then it will not run again.
// Without an Inspector, or when the read fails, it reports false and the
// ack counts as lost, as before.
func (c *completer) finishedInStore(id string) bool {
	in, ok := c.q.(Inspector)
	if !ok {
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
