package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// errShutdown is the cause a job's context is cancelled with when the
// worker's shutdown grace runs out.
var errShutdown = errors.New("queue: worker shut down before the job finished")

// maxAckBatch caps how many acks one flush sends.
const maxAckBatch = 1000

// ackFlushers is how many ack flushes may be in flight at once.
const ackFlushers = 2

// maxReason caps the error text stored with a job.
const maxReason = 16 << 10

// run is one execution of Worker.Run: its goroutines and the leases it holds.
type run struct {
	w     *Worker
	q     Queue
	log   *slog.Logger
	lease time.Duration
	id    string
	acker BatchAcker
	// extender is the queue's BatchExtender, nil when it has none.
	extender BatchExtender
	waiter   Waiter
	runObs   RunObserver

	jobs  chan *Job     // reserved jobs, to the executors
	freed chan struct{} // one token per slot an executor frees

	baseCtx    context.Context // parent of handler contexts
	cancelBase context.CancelCauseFunc
	bgCtx      context.Context // for queue calls; cancelled last
	cancelBg   context.CancelFunc

	mu     sync.Mutex
	active map[string]*held // leases this run holds: running or awaiting an ack flush

	ackMu     sync.RWMutex
	ackClosed bool
	acks      chan ackItem
	ackDone   chan struct{}

	executors sync.WaitGroup
}

// held is one lease the run holds.
type held struct {
	lease   Lease
	expires time.Time
	cancel  context.CancelCauseFunc // nil once the handler has returned
	lost    bool
}

type ackItem struct {
	j     *Job
	start time.Time
	rt    time.Duration
}

func newRun(w *Worker) *run {
	r := &run{
		w:       w,
		q:       w.q,
		log:     w.log,
		lease:   w.leaseFor(),
		id:      NewID(),
		jobs:    make(chan *Job, w.concurrency+w.prefetch),
		freed:   make(chan struct{}, w.concurrency+w.prefetch),
		active:  make(map[string]*held),
		acks:    make(chan ackItem, w.concurrency+w.prefetch),
		ackDone: make(chan struct{}),
	}
	r.acker, _ = w.q.(BatchAcker)
	r.extender, _ = w.q.(BatchExtender)
	r.waiter, _ = w.q.(Waiter)
	r.runObs, _ = w.q.(RunObserver)
	r.baseCtx, r.cancelBase = context.WithCancelCause(context.Background())
	r.bgCtx, r.cancelBg = context.WithCancel(context.Background())
	return r
}

func (r *run) run(ctx context.Context) error {
	stopCtx, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	go func() {
		select {
		case <-r.w.stopCh:
			cancelStop()
		case <-stopCtx.Done():
		}
	}()

	for range r.w.concurrency {
		r.executors.Add(1)
		go r.executor()
	}
	if r.acker != nil {
		// Two flushers, so one batch is sent while the next gathers and a
		// slow flush does not stall the handlers behind a full ack buffer.
		var flushers sync.WaitGroup
		for range ackFlushers {
			flushers.Go(r.ackLoop)
		}
		go func() { flushers.Wait(); close(r.ackDone) }()
	} else {
		close(r.ackDone)
	}
	bgDone := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); r.extendLoop(bgDone) }()
	if reg, ok := r.q.(WorkerRegistry); ok {
		bg.Add(1)
		go func() { defer bg.Done(); r.heartbeatLoop(reg, bgDone) }()
	}
	r.log.Info("queue: worker started", "worker", r.id, "queues", r.w.queues, "concurrency", r.w.concurrency)

	r.fetchLoop(stopCtx)

	r.shutdown()
	close(bgDone)
	bg.Wait()
	r.cancelBg()
	r.log.Info("queue: worker stopped", "worker", r.id)
	return nil
}

// prefetchHorizon is how much work, in time at the recent completion rate,
// the fetch loop reserves ahead of free handlers.
const prefetchHorizon = 50 * time.Millisecond

// fetchLoop reserves jobs until stopCtx is done. It keeps every handler
// busy and, when jobs finish quickly, a short buffer beyond them: up to the
// jobs the worker completes in prefetchHorizon at its recent rate, capped by
// Prefetch. Slow jobs therefore get no prefetch (no job waits long leased to
// a busy process), while fast ones are reserved hundreds per round trip.
func (r *run) fetchLoop(stopCtx context.Context) {
	conc := r.w.concurrency
	outstanding := 0 // reserved and not finished: buffered or running
	var rate float64 // completions per second, smoothed
	completed := 0
	sampled := time.Now()
	errDelay := 50 * time.Millisecond
	for {
	drain:
		for {
			select {
			case <-r.freed:
				outstanding--
				completed++
			default:
				break drain
			}
		}
		if stopCtx.Err() != nil {
			return
		}
		if now := time.Now(); now.Sub(sampled) >= 10*time.Millisecond {
			cur := float64(completed) / now.Sub(sampled).Seconds()
			rate = (rate + cur) / 2
			completed, sampled = 0, now
		}
		ahead := min(r.w.prefetch, int(rate*prefetchHorizon.Seconds()))
		want := conc + ahead - outstanding
		// Reserve when a handler is idle, or when the buffer has room for a
		// batch worth a round trip; else wait for a handler to finish.
		if outstanding >= conc && (want <= 0 || want < ahead/2) {
			select {
			case <-r.freed:
				outstanding--
				completed++
				continue
			case <-stopCtx.Done():
				return
			}
		}
		// Reserve with the run's own context: a reservation cut off half
		// way would leave jobs leased to nobody until their leases expire.
		jobs, err := r.reserve(want)
		for _, j := range jobs {
			r.track(j)
			outstanding++
			r.jobs <- j
		}
		switch {
		case err != nil:
			r.log.Error("queue: reserving jobs", "err", err, "retry_in", errDelay)
			if !sleepCtx(stopCtx, errDelay) {
				return
			}
			errDelay = min(errDelay*2, max(r.w.poll, 5*time.Second))
		case len(jobs) == 0:
			// Nothing ready: wait for a wake-up or the poll, whether or not
			// handlers are still busy, rather than asking again at once.
			errDelay = 50 * time.Millisecond
			r.idle(stopCtx)
		default:
			errDelay = 50 * time.Millisecond
		}
	}
}

// reserve takes up to n jobs, from the worker's queues in priority order.
func (r *run) reserve(n int) ([]*Job, error) {
	var out []*Job
	for _, qn := range r.w.queues {
		if n == 0 {
			break
		}
		jobs, err := r.q.Reserve(r.bgCtx, []string{qn}, n, r.lease)
		for i := range jobs {
			out = append(out, &jobs[i])
		}
		n -= len(jobs)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// idle waits for work: woken by the queue when it can, else after Poll.
func (r *run) idle(stopCtx context.Context) {
	if r.waiter != nil {
		err := r.waiter.Wait(stopCtx, r.w.queues, r.w.poll)
		if err != nil && stopCtx.Err() == nil {
			r.log.Warn("queue: waiting for jobs", "err", err)
			sleepCtx(stopCtx, r.w.poll)
		}
		return
	}
	sleepCtx(stopCtx, r.w.poll)
}

// sleepCtx sleeps for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *run) track(j *Job) {
	exp := j.LeaseExpiresAt
	if exp.IsZero() {
		exp = time.Now().Add(r.lease)
	}
	r.mu.Lock()
	r.active[j.ID] = &held{lease: j.Lease(), expires: exp}
	r.mu.Unlock()
}

func (r *run) untrack(id string) {
	r.mu.Lock()
	delete(r.active, id)
	r.mu.Unlock()
}

func (r *run) executor() {
	defer r.executors.Done()
	for j := range r.jobs {
		r.execute(j)
		r.freed <- struct{}{}
	}
}

// execute runs one attempt of j and records its outcome.
func (r *run) execute(j *Job) {
	maxA := r.w.maxAttempts(j)
	if j.Attempts > maxA {
		err := fmt.Errorf("%w: job %s was delivered %d times but allows %d attempts; the earlier deliveries' leases expired before they finished (a worker crashed, was killed, or lost its lease)",
			ErrAttemptsExhausted, j.ID, j.Attempts, maxA)
		r.fail(j, err, time.Now(), 0)
		return
	}
	if r.baseCtx.Err() != nil {
		// The shutdown grace ran out before this prefetched job started:
		// release it for another worker without running it.
		r.nack(j, errShutdown, time.Now(), time.Now(), 0)
		return
	}
	h := r.w.handlers[j.Name]
	if h == nil {
		err := fmt.Errorf("%w: %q (job %s); register one with Handle", ErrUnknownJob, j.Name, j.ID)
		r.fail(j, err, time.Now(), 0)
		return
	}
	h = r.w.chain(h)

	timeout := r.w.timeout
	if j.Timeout > 0 {
		timeout = j.Timeout
	}
	jctx, cancel := context.WithCancelCause(context.WithValue(r.baseCtx, jobKey{}, j))
	defer cancel(nil)
	if timeout > 0 {
		var cancelT context.CancelFunc
		jctx, cancelT = context.WithTimeoutCause(jctx, timeout, ErrTimeout)
		defer cancelT()
	}
	r.mu.Lock()
	hd := r.active[j.ID]
	if hd != nil {
		hd.cancel = cancel
	}
	r.mu.Unlock()

	r.w.observe(EventStarted, j, nil, 0)
	start := time.Now()
	var err error
	if timeout > 0 {
		err = r.callAbandonable(jctx, h, j, timeout)
	} else {
		err = safeCall(jctx, h, j)
	}
	rt := time.Since(start)

	r.mu.Lock()
	lost := hd != nil && hd.lost
	if hd != nil {
		hd.cancel = nil
	}
	r.mu.Unlock()

	if err != nil && errors.Is(context.Cause(jctx), ErrTimeout) && !errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("%w after %s: %w", ErrTimeout, timeout, err)
	}
	switch {
	case lost:
		r.untrack(j.ID)
		r.w.observe(EventLeaseLost, j, err, rt)
		r.log.Warn("queue: job's lease was lost while it ran; its result is discarded", "job", j.ID, "name", j.Name)
	case err == nil:
		r.ack(j, start, rt)
	case errors.Is(context.Cause(jctx), errShutdown):
		r.nack(j, fmt.Errorf("%w: %w", errShutdown, err), time.Now(), start, rt)
	case IsPermanent(err) || j.Attempts >= maxA:
		r.fail(j, err, start, rt)
	default:
		r.nack(j, err, time.Now().Add(r.w.backoff.Backoff(j.Attempts)), start, rt)
	}
}

// safeCall runs h, turning a panic into an error with its stack.
func safeCall(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
	}()
	return h(ctx, *j)
}

// callAbandonable runs h on its own goroutine so that a handler that ignores
// its context past the timeout can be abandoned after the grace period.
func (r *run) callAbandonable(ctx context.Context, h Handler, j *Job, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- safeCall(ctx, h, j) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(r.w.grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	r.log.Error("queue: handler did not return after its context was cancelled; abandoning its goroutine",
		"job", j.ID, "name", j.Name, "timeout", timeout, "grace", r.w.grace, "cause", context.Cause(ctx))
	go func() {
		err := <-done
		r.log.Warn("queue: abandoned handler finally returned; its result is discarded", "job", j.ID, "err", err)
	}()
	if errors.Is(context.Cause(ctx), ErrTimeout) {
		return fmt.Errorf("%w after %s: handler did not return within %s of cancellation", ErrTimeout, timeout, r.w.grace)
	}
	return fmt.Errorf("handler did not return within %s of cancellation: %w", r.w.grace, context.Cause(ctx))
}

func (r *run) ack(j *Job, start time.Time, rt time.Duration) {
	if r.acker != nil {
		r.ackMu.RLock()
		if !r.ackClosed {
			r.acks <- ackItem{j: j, start: start, rt: rt}
			r.ackMu.RUnlock()
			return
		}
		r.ackMu.RUnlock()
	}
	if r.settled(j, r.q.Ack(r.bgCtx, j.Lease()), "acking", rt) {
		r.finished(j, OutcomeDone, nil, start, rt)
	}
}

func (r *run) nack(j *Job, cause error, at time.Time, start time.Time, rt time.Duration) {
	if r.settled(j, r.q.Nack(r.bgCtx, j.Lease(), at, reason(cause)), "nacking", rt) {
		r.log.Debug("queue: job failed; retrying", "job", j.ID, "name", j.Name, "attempt", j.Attempts, "retry_at", at, "err", cause)
		r.finished(j, OutcomeRetried, cause, start, rt)
	}
}

func (r *run) fail(j *Job, cause error, start time.Time, rt time.Duration) {
	if !r.settled(j, r.q.Fail(r.bgCtx, j.Lease(), reason(cause)), "dead-lettering", rt) {
		return
	}
	r.log.Warn("queue: job dead-lettered", "job", j.ID, "name", j.Name, "attempts", j.Attempts, "err", cause)
	r.finished(j, OutcomeFailed, cause, start, rt)
	if r.w.onFailed != nil {
		dead := *j // the handler may still hold j if it was abandoned
		dead.LastError = reason(cause)
		r.w.onFailed(dead, cause)
	}
}

// settled stops tracking j after an ack, nack or fail (doing names which)
// returned err, logs a failure, and reports whether the call took effect.
func (r *run) settled(j *Job, err error, doing string, rt time.Duration) bool {
	r.untrack(j.ID)
	switch {
	case errors.Is(err, ErrLeaseLost):
		r.w.observe(EventLeaseLost, j, err, rt)
		r.log.Warn("queue: "+doing+" job after its lease was lost; it will run again", "job", j.ID, "name", j.Name)
		return false
	case err != nil:
		r.log.Error("queue: "+doing+" job; it will be delivered again when its lease expires", "job", j.ID, "name", j.Name, "err", err)
		return false
	}
	return true
}

// finished reports a recorded outcome to the observer and the driver's
// metrics.
func (r *run) finished(j *Job, o Outcome, cause error, start time.Time, rt time.Duration) {
	kind := EventDone
	switch o {
	case OutcomeRetried:
		kind = EventRetried
	case OutcomeFailed:
		kind = EventFailed
	}
	r.w.observe(kind, j, cause, rt)
	if r.runObs != nil {
		avail := j.AvailableAt
		if avail.IsZero() {
			avail = j.CreatedAt
		}
		wait := time.Duration(0)
		if !avail.IsZero() && start.After(avail) {
			wait = start.Sub(avail)
		}
		r.runObs.ObserveRun(RunRecord{Queue: j.QueueName(), Name: j.Name, Start: start, Runtime: rt, Wait: wait, Outcome: o, Attempts: j.Attempts})
	}
}

func reason(err error) string {
	s := err.Error()
	if len(s) > maxReason {
		s = s[:maxReason] + "…(truncated)"
	}
	return s
}

// ackLoop collects acks and flushes them in batches: it takes whatever has
// queued up while the previous flush ran, so batches grow with load and a
// lone ack goes out at once.
func (r *run) ackLoop() {
	batch := make([]ackItem, 0, 64)
	for it := range r.acks {
		batch = append(batch[:0], it)
	more:
		for len(batch) < maxAckBatch {
			select {
			case it, ok := <-r.acks:
				if !ok {
					break more
				}
				batch = append(batch, it)
			default:
				break more
			}
		}
		r.flush(batch)
	}
}

// flush acks a batch, retrying a failed flush while the leases hold. The
// extension loop keeps the leases alive meanwhile, since the jobs stay
// tracked until flushed.
func (r *run) flush(batch []ackItem) {
	leases := make([]Lease, len(batch))
	for i, it := range batch {
		leases[i] = it.j.Lease()
	}
	delay := 10 * time.Millisecond
	var lost []Lease
	for {
		var err error
		lost, err = r.acker.AckMany(r.bgCtx, leases)
		if err == nil {
			break
		}
		if r.bgCtx.Err() != nil || !r.leasesHold(leases) {
			r.log.Error("queue: flushing acks failed and the leases ran out; these jobs will run again", "jobs", len(leases), "err", err)
			for _, it := range batch {
				r.untrack(it.j.ID)
			}
			return
		}
		r.log.Warn("queue: flushing acks failed; retrying while the leases hold", "jobs", len(leases), "err", err, "retry_in", delay)
		time.Sleep(delay)
		delay = min(delay*2, time.Second)
	}
	lostSet := make(map[string]bool, len(lost))
	for _, l := range lost {
		lostSet[l.JobID] = true
	}
	for _, it := range batch {
		r.untrack(it.j.ID)
		if lostSet[it.j.ID] {
			r.w.observe(EventLeaseLost, it.j, ErrLeaseLost, it.rt)
			r.log.Warn("queue: ack after the lease was lost; the job will run again", "job", it.j.ID, "name", it.j.Name)
			continue
		}
		r.finished(it.j, OutcomeDone, nil, it.start, it.rt)
	}
}

// leasesHold reports whether any of leases is still tracked and unexpired.
func (r *run) leasesHold(leases []Lease) bool {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		if h := r.active[l.JobID]; h != nil && !h.lost && h.expires.After(now) {
			return true
		}
	}
	return false
}

// extendLoop extends the leases of jobs that are still held when half their
// lease has passed.
func (r *run) extendLoop(done <-chan struct{}) {
	tick := time.NewTicker(max(r.lease/4, 5*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		now := time.Now()
		var due []Lease
		r.mu.Lock()
		for _, h := range r.active {
			if !h.lost && h.expires.Sub(now) < r.lease/2 {
				due = append(due, h.lease)
			}
		}
		r.mu.Unlock()
		if r.extender != nil {
			for start := 0; start < len(due); start += maxExtendBatch {
				r.extendMany(due[start:min(start+maxExtendBatch, len(due))], now)
			}
			continue
		}
		for _, l := range due {
			r.extended(l, now, r.q.Extend(r.bgCtx, l, r.lease))
		}
	}
}

// maxExtendBatch bounds one ExtendMany call.
const maxExtendBatch = 1000

// extendMany extends leases in one call; a failed call leaves them to the
// next round, as a failed Extend does.
func (r *run) extendMany(leases []Lease, now time.Time) {
	lost, err := r.extender.ExtendMany(r.bgCtx, leases, r.lease)
	if err != nil {
		if r.bgCtx.Err() == nil {
			r.log.Warn("queue: extending leases", "jobs", len(leases), "err", err)
		}
		return
	}
	gone := make(map[Lease]bool, len(lost))
	for _, l := range lost {
		gone[l] = true
	}
	for _, l := range leases {
		if gone[l] {
			r.extended(l, now, ErrLeaseLost)
		} else {
			r.extended(l, now, nil)
		}
	}
}

// extended records the outcome of extending l at now: a new expiry, or a
// lost lease whose handler is cancelled. Other errors leave the lease to
// the next round.
func (r *run) extended(l Lease, now time.Time, err error) {
	r.mu.Lock()
	h := r.active[l.JobID]
	switch {
	case h == nil || h.lease != l:
	case err == nil:
		h.expires = now.Add(r.lease)
	case errors.Is(err, ErrLeaseLost):
		h.lost = true
		if h.cancel != nil {
			h.cancel(ErrLeaseLost)
		}
	}
	r.mu.Unlock()
	if err != nil && !errors.Is(err, ErrLeaseLost) && r.bgCtx.Err() == nil {
		r.log.Warn("queue: extending lease", "job", l.JobID, "err", err)
	}
	if errors.Is(err, ErrLeaseLost) {
		r.log.Warn("queue: lease lost while the job ran; cancelling its handler", "job", l.JobID)
	}
}

func (r *run) heartbeatLoop(reg WorkerRegistry, done <-chan struct{}) {
	info := WorkerInfo{ID: r.id, Host: hostname(), PID: os.Getpid(), Queues: r.w.queues, Concurrency: r.w.concurrency, StartedAt: time.Now()}
	t := time.NewTicker(r.w.heartbeat)
	defer t.Stop()
	for {
		if err := reg.Heartbeat(r.bgCtx, info); err != nil && r.bgCtx.Err() == nil {
			r.log.Warn("queue: worker heartbeat", "err", err)
		}
		select {
		case <-done:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := reg.Deregister(ctx, r.id); err != nil {
				r.log.Warn("queue: deregistering worker", "err", err)
			}
			cancel()
			return
		case <-t.C:
		}
	}
}

// shutdown lets running jobs finish within ShutdownTimeout, cancels the
// rest, and flushes pending acks.
func (r *run) shutdown() {
	close(r.jobs)
	execDone := make(chan struct{})
	go func() { r.executors.Wait(); close(execDone) }()
	t := time.NewTimer(r.w.shutdownTimeout)
	select {
	case <-execDone:
	case <-t.C:
		r.log.Warn("queue: shutdown timeout reached; cancelling running jobs", "timeout", r.w.shutdownTimeout)
		r.cancelBase(errShutdown)
		g := time.NewTimer(r.w.grace)
		select {
		case <-execDone:
		case <-g.C:
			r.log.Error("queue: handlers ignored cancellation; abandoning them (their jobs run again after their leases expire)", "grace", r.w.grace)
		}
		g.Stop()
	}
	t.Stop()
	r.cancelBase(errShutdown)

	r.ackMu.Lock()
	r.ackClosed = true
	close(r.acks)
	r.ackMu.Unlock()
	flushT := time.AfterFunc(10*time.Second, r.cancelBg)
	<-r.ackDone
	flushT.Stop()
}
