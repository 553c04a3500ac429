package memqueue

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// DefaultRetention is how many acked jobs a Queue keeps, by default, for
// inspection as StateDone.
const DefaultRetention = 1000

// workerTTL is how long a worker registry entry lives without a heartbeat.
const workerTTL = time.Minute

// Option configures a Queue.
type Option func(*Queue)

// WithRetention keeps the last n acked jobs so that inspection can list and
// get them in StateDone; older ones are deleted. Zero keeps none; a negative
// n is treated as zero. The default is DefaultRetention.
func WithRetention(n int) Option {
	return func(q *Queue) { q.retention = max(n, 0) }
}

// WithClock makes the queue read the time from now instead of time.Now. It
// is meant for tests of time-based behaviour (delays, leases, metrics
// windows). Wait still sleeps in real time, bounded by its max.
func WithClock(now func() time.Time) Option {
	return func(q *Queue) {
		if now != nil {
			q.now = now
		}
	}
}

// Queue is an in-memory queue.Queue. It implements every optional ability
// of package queue/driver: Inspector, Controller, Workflows, Scheduler,
// Reporter, Waiter, Fleet, MetricsHistory, TagMonitor, Grouper and
// Sequencer.
//
// All methods are safe for concurrent use by many goroutines. The zero
// value is not usable; call New.
type Queue struct {
	mu     sync.Mutex
	now    func() time.Time
	seq    uint64 // insertion order
	tokens uint64 // lease tokens handed out
	deaths uint64 // dead-letterings, for "most recently failed first"

	jobs   map[string]*entry // every ready, scheduled, running, dead and retained done job
	queues map[string]*namedQueue
	// leased holds the running jobs by lease token: acks, starts and
	// extensions find their job here, in a map as small as the jobs
	// leased, rather than in jobs, which holds the whole backlog (looking
	// leases up there was a sixth of a 1,000,000-job burn-down's work).
	leased map[string]*entry

	retention int
	done      []*entry // ring of retained acked jobs
	doneNext  int

	workers map[string]driver.WorkerInfo
	fleet   fleetOrders // Fleet

	leases    map[string]lease         // named leases (Leaser)
	cancels   []cancelRecord           // cancels of running jobs, oldest first
	periodics map[string]*periodicMark // periodic jobs' marks (Scheduler)

	batches   map[string]*batch // batches by ID (Workflows)
	batchList []*batch          // batches in the order they were created; nil where one was forgotten
	// finishedBatches are the batches kept after finishing, oldest first
	// (see maxFinishedBatches); clearedBatches counts batchList's nils.
	finishedBatches []*batch
	clearedBatches  int

	graphs    map[string]*graph // graphs by ID (Graphs)
	graphList []*graph          // graphs in the order they were dispatched

	monitor monitor // monitored tags (TagMonitor)

	results results // job results (Results)
}

// entry is one stored job. Every queued job holds one, so its size is most
// of the memory a queued job costs: it is kept within the 448-byte size
// class (the finish time is derived, the rarely kept history is behind a
// pointer).
type entry struct {
	job       queue.Job
	state     driver.JobState // "" once deleted or replaced
	seq       uint64          // insertion order
	avail     int64           // job.AvailableAt in Unix nanoseconds
	at        int64           // time-heap key: AvailableAt (scheduled) or lease expiry (running)
	idx       int             // index in the heap that holds it
	deathSeq  uint64          // order of dead-lettering
	nq        *namedQueue
	updatedAt time.Time // also the finish time of a finished job (finishedAt)
	startedAt time.Time // of the latest attempt
	worker    string    // that reserved the latest attempt
	history   *notes
}

// notes is what a job's history keeps: its failed attempts and the
// operators' changes (Amend), each the last driver.MaxHistory.
type notes struct {
	attempts []driver.Attempt
	actions  []driver.Action
}

// finishedAt returns when e finished: its last update while it is done,
// dead or cancelled (a finished job changes only by a retry, which makes
// it ready), else the zero time.
func (e *entry) finishedAt() time.Time {
	switch e.state {
	case queue.StateDone, queue.StateDead, queue.StateCancelled:
		return e.updatedAt
	}
	return time.Time{}
}

// attempts returns a copy of e's failed attempts, oldest first.
func (e *entry) attempts() []driver.Attempt {
	if e.history == nil {
		return nil
	}
	return slices.Clone(e.history.attempts)
}

// failedAttempt records the attempt under way as failed with reason, at
// now, keeping the last driver.MaxHistory.
func (e *entry) failedAttempt(reason string, now time.Time) {
	if e.history == nil {
		e.history = new(notes)
	}
	h := e.history.attempts
	if len(h) == driver.MaxHistory {
		h = append(h[:0], h[1:]...)
	}
	e.history.attempts = append(h, driver.Attempt{Attempt: e.job.Attempts, Started: e.startedAt,
		Runtime: now.Sub(e.startedAt), Error: reason, Worker: e.worker})
}

// namedQueue holds the jobs of one named queue.
type namedQueue struct {
	name      string
	ready     readyQueue
	scheduled jobHeap
	running   jobHeap
	unique    map[string]*entry // unique key -> active job
	heldUntil map[string]int64  // unique key -> end of a UniqueFor hold, Unix nanoseconds
	dead      map[string]*entry // ID -> dead letter
	paused    bool
	leased    map[string]*entry    // the Queue's leased
	groups    map[string]*group    // group members by groupID (Grouper)
	seqs      map[string]*sequence // sequences by key (Sequencer)
	wake      chan struct{}        // closed and cleared when a job may have become ready
	metrics   [minuteSlots]metricSlot
	hours     [hourSlots]metricSlot
}

// A memory queue has every ability of a store.
var (
	_ queue.Queue       = (*Queue)(nil)
	_ driver.Inspector  = (*Queue)(nil)
	_ driver.Controller = (*Queue)(nil)
	_ driver.Workflows  = (*Queue)(nil)
	_ driver.Results    = (*Queue)(nil)
	_ driver.Scheduler  = (*Queue)(nil)
	_ driver.Reporter   = (*Queue)(nil)
	_ driver.Waiter     = (*Queue)(nil)
)

// Close releases nothing and returns nil: a memory queue holds no
// connection or file, only memory the garbage collector reclaims. It exists
// so that a memqueue is an io.Closer like every queue queue.Open returns;
// the queue stays usable after Close.
func (q *Queue) Close() error { return nil }

// New returns an empty queue.
func New(opts ...Option) *Queue {
	q := &Queue{
		now:       time.Now,
		jobs:      make(map[string]*entry),
		queues:    make(map[string]*namedQueue),
		leased:    make(map[string]*entry),
		retention: DefaultRetention,
		workers:   make(map[string]driver.WorkerInfo),
		leases:    make(map[string]lease),
		periodics: make(map[string]*periodicMark),
	}
	for _, o := range opts {
		o(q)
	}
	q.done = make([]*entry, 0, q.retention)
	return q
}

// namedQueueLocked returns the named queue, creating it if needed.
func (q *Queue) namedQueueLocked(name string) *namedQueue {
	nq := q.queues[name]
	if nq == nil {
		nq = &namedQueue{
			name:      name,
			scheduled: jobHeap{byTime: true},
			running:   jobHeap{byTime: true},
			unique:    make(map[string]*entry),
			heldUntil: make(map[string]int64),
			dead:      make(map[string]*entry),
			leased:    q.leased,
		}
		q.queues[name] = nq
	}
	return nq
}

// selectQueuesLocked returns the named queues that exist, or every queue
// when name is empty.
func (q *Queue) selectQueuesLocked(name string) []*namedQueue {
	if name != "" {
		if nq := q.queues[name]; nq != nil {
			return []*namedQueue{nq}
		}
		return nil
	}
	out := make([]*namedQueue, 0, len(q.queues))
	for _, nq := range q.queues {
		out = append(out, nq)
	}
	return out
}

// promote moves scheduled jobs whose time has come and running jobs whose
// lease has expired to the ready heap.
func (nq *namedQueue) promote(now int64, at time.Time) {
	for nq.scheduled.len() > 0 && nq.scheduled.items[0].at <= now {
		e := nq.scheduled.pop()
		e.state = queue.StateReady
		nq.ready.push(e)
	}
	for nq.running.len() > 0 && nq.running.items[0].at <= now {
		e := nq.running.pop()
		e.state = queue.StateReady
		nq.unlease(e)
		e.job.Recovered = true // until it is reserved again
		e.updatedAt = at
		nq.ready.push(e)
	}
}

// unlease clears e's lease and forgets its token.
func (nq *namedQueue) unlease(e *entry) {
	if nq.leased[e.job.LeaseToken] == e {
		delete(nq.leased, e.job.LeaseToken)
	}
	e.job.LeaseToken = ""
	e.job.LeaseExpiresAt = time.Time{}
}

// nextDue returns the earliest time, in Unix nanoseconds, at which a job of
// nq not yet ready may become ready, or limit if that is later.
func (nq *namedQueue) nextDue(limit int64) int64 {
	if nq.scheduled.len() > 0 {
		limit = min(limit, nq.scheduled.items[0].at)
	}
	if nq.running.len() > 0 {
		limit = min(limit, nq.running.items[0].at)
	}
	return limit
}

// signal wakes every Wait blocked on nq.
func (nq *namedQueue) signal() {
	if nq.wake != nil {
		close(nq.wake)
		nq.wake = nil
	}
}

// Push stores j under Push's contract (see queue.Pusher). The payload is
// copied; Tags and Meta are copied too, so the caller's values stay its own.
func (q *Queue) Push(ctx context.Context, j queue.Job) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: pushing job: %w", err)
	}
	if err := driver.Validate(j); err != nil {
		return err
	}
	if j.ID == "" {
		j.ID = driver.NewID()
	}
	q.mu.Lock()
	err := q.pushLocked(j, q.now())
	q.mu.Unlock()
	if err != nil {
		return fmt.Errorf("memqueue: pushing job %s: %w", j.ID, err)
	}
	return nil
}

// pushLocked stores j. It returns a *driver.DuplicateError for a duplicate.
func (q *Queue) pushLocked(j queue.Job, now time.Time) error {
	if j.ID == "" {
		j.ID = driver.NewID()
	}
	old := q.jobs[j.ID]
	if old != nil && isActive(old.state) {
		return &driver.DuplicateError{ExistingID: old.job.ID}
	}
	j.Queue = j.QueueName()
	nq := q.namedQueueLocked(j.Queue)
	nowN := now.UnixNano()
	if k := j.UniqueKey; k != "" {
		if until, ok := nq.heldUntil[k]; ok && until <= nowN {
			delete(nq.heldUntil, k)
		}
		holder := nq.unique[k]
		if holder != nil && (holder == old || !q.holdsLocked(holder)) {
			// j replaces its own finished or dead job, or the holder
			// left its key when it left the states that hold it.
			holder = nil
		}
		switch {
		case holder != nil && j.UniqueReplace && holder.state != queue.StateRunning && holder.job.ID != j.ID:
			// Debounce: the waiting holder gives way to j.
			q.removeWaitingLocked(holder)
		case holder != nil:
			return &driver.DuplicateError{ExistingID: holder.job.ID, UniqueKey: k}
		case nq.heldUntil[k] > nowN:
			return &driver.DuplicateError{UniqueKey: k}
		}
	}
	var place seat
	if old != nil {
		// A dead letter (moved back by this push) or a retained done job
		// (replaced by a new job with the same ID).
		place = q.reseatLocked(old, j, nq)
		if old.state == queue.StateDead {
			delete(old.nq.dead, old.job.ID)
			if j.CreatedAt.IsZero() {
				j.CreatedAt = old.job.CreatedAt
			}
		}
		q.releaseKeyLocked(old, "")
		old.state = ""
	}

	j.Payload = bytes.Clone(j.Payload)
	j.Tags = slices.Clone(j.Tags)
	j.Meta = maps.Clone(j.Meta)
	j.Attempts = 0
	j.Snoozes = 0
	if j.UniqueFor > 0 && j.UniqueKey != "" {
		nq.heldUntil[j.UniqueKey] = nowN + int64(j.UniqueFor)
	}
	j.UniqueFor, j.UniqueReplace = 0, false
	j.UniqueStates = slices.Clone(j.UniqueStates)
	j.LeaseToken = ""
	j.LeaseExpiresAt = time.Time{}
	j.Recovered = false
	if j.CreatedAt.IsZero() {
		j.CreatedAt = now
	}
	if j.AvailableAt.IsZero() {
		j.AvailableAt = now
	}
	q.seq++
	e := &entry{job: j, seq: q.seq, avail: nanos(j.AvailableAt), nq: nq, updatedAt: now}
	q.jobs[j.ID] = e
	if j.UniqueKey != "" {
		nq.unique[j.UniqueKey] = e
	}
	if len(j.Actions) > 0 {
		e.job.Actions = nil
		for _, a := range j.Actions {
			e.acted(a, now)
		}
	}
	if driver.GroupKeyOf(j) != "" {
		q.groupLocked(e)
		return nil
	}
	if key := j.Meta[driver.MetaSequence]; key != "" && q.sequenceLocked(e, key, place) {
		return nil
	}
	q.enqueueLocked(e, nowN)
	return nil
}

// removeWaitingLocked deletes the ready or scheduled job e (replaced by a
// push).
func (q *Queue) removeWaitingLocked(e *entry) {
	switch e.state {
	case queue.StateReady:
		e.nq.ready.remove(e)
	case queue.StateScheduled:
		e.nq.scheduled.remove(e.idx)
	}
	q.leaveSequenceLocked(e)
	q.releaseKeyLocked(e, "")
	delete(q.jobs, e.job.ID)
	e.state = ""
}

// enqueueLocked puts e on its queue's ready or scheduled heap by its
// AvailableAt and wakes waiters.
func (q *Queue) enqueueLocked(e *entry, now int64) {
	nq := e.nq
	if e.avail <= now {
		e.state = queue.StateReady
		nq.ready.push(e)
	} else {
		e.state = queue.StateScheduled
		e.at = e.avail
		nq.scheduled.push(e)
	}
	nq.signal()
}

func isActive(s driver.JobState) bool {
	return s == queue.StateReady || s == queue.StateScheduled || s == queue.StateRunning || s == driver.StateGrouped ||
		s == driver.StateSequenced
}

// PushMany stores jobs with Push's rules in one critical section. stored[i]
// is false for a job skipped as a duplicate, including a duplicate of an
// earlier job in the same batch. A job without an ID is given one.
func (q *Queue) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: pushing %d jobs: %w", len(jobs), err)
	}
	if err := driver.ValidateBatch(jobs); err != nil {
		return nil, err
	}
	stored := make([]bool, len(jobs))
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for i := range jobs {
		stored[i] = q.pushLocked(jobs[i], now) == nil
	}
	return stored, nil
}

var defaultQueues = []string{queue.DefaultQueue}

// Reserve leases up to max ready jobs from queues (see queue.Queue). Jobs of
// several queues are merged in one order: priority, then AvailableAt, then
// insertion. Paused queues are skipped. A max below 1 reserves nothing; a
// lease of zero or less expires at once.
//
// The returned jobs share their Payload, Tags and Meta with the stored job;
// callers must not modify them.
func (q *Queue) Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, claimCount{fresh: 1, recovered: 1})
}

// ReserveUnstarted is Reserve without counting the attempt (see
// queue.Queue); Complete's starts count it.
func (q *Queue) ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, claimCount{})
}

// ReserveStarting is Reserve counting the attempts of the jobs it hands
// out fresh and not of those taken back from an expired lease (see
// queue.Queue).
func (q *Queue) ReserveStarting(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, claimCount{fresh: 1})
}

// claimCount is what a reservation adds to the attempts of the jobs it
// takes: fresh to a job with no lease before it, recovered to one taken
// back from an expired lease (queue.Job.Recovered).
type claimCount struct{ fresh, recovered int }

// start counts one attempt for the job under each current lease, in one
// critical section, and returns the leases that were not current. It fails
// as a whole only for ctx.
func (q *Queue) start(ctx context.Context, leases []driver.Lease) ([]driver.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: starting %d jobs: %w", len(leases), err)
	}
	var lost []driver.Lease
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for _, l := range leases {
		e := q.leasedLocked(l, now.UnixNano())
		if e == nil {
			lost = append(lost, l)
			continue
		}
		e.job.Attempts++
		e.updatedAt, e.startedAt = now, now // the attempt starts now, not at its reservation
	}
	return lost, nil
}

// reserve is Reserve, adding inc to each job's attempts.
func (q *Queue) reserve(ctx context.Context, queues []string, max int, lease time.Duration, inc claimCount) ([]queue.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: reserving jobs: %w", err)
	}
	worker := driver.WorkerOf(ctx)
	if max < 1 {
		return nil, nil
	}
	if len(queues) == 0 {
		queues = defaultQueues
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	nowN := now.UnixNano()

	var buf [8]*namedQueue
	nqs := buf[:0]
	ready := 0
	for _, name := range queues {
		nq := q.queues[name]
		if nq == nil || nq.paused || slices.Contains(nqs, nq) {
			continue
		}
		nq.promote(nowN, now)
		if nq.ready.len() > 0 {
			nqs = append(nqs, nq)
			ready += nq.ready.len()
		}
	}
	if ready == 0 {
		return nil, nil
	}
	n := min(max, ready)
	out := make([]queue.Job, 0, n)
	expires := now.Add(lease)
	expiresN := nanos(expires)
	// The batch's tokens are formatted into one string and sliced from it:
	// one allocation per Reserve rather than one per job.
	tokBuf := make([]byte, 0, n*8)
	ends := make([]int, 0, n)
	for i := range n {
		tokBuf = strconv.AppendUint(tokBuf, q.tokens+uint64(i)+1, 36)
		ends = append(ends, len(tokBuf))
	}
	toks := string(tokBuf)
	for len(out) < max {
		var best *namedQueue
		var bestEntry *entry
		for _, nq := range nqs {
			e := nq.ready.peek()
			if e != nil && (bestEntry == nil || readyLess(e, bestEntry)) {
				best, bestEntry = nq, e
			}
		}
		if best == nil {
			break
		}
		e := best.ready.pop()
		q.tokens++
		e.state = queue.StateRunning
		if e.job.Recovered {
			e.job.Attempts += inc.recovered
		} else {
			e.job.Attempts += inc.fresh
		}
		i, from := len(out), 0
		if i > 0 {
			from = ends[i-1]
		}
		e.job.LeaseToken = toks[from:ends[i]]
		q.leased[e.job.LeaseToken] = e
		e.job.LeaseExpiresAt = expires
		e.at = expiresN
		e.updatedAt = now
		e.startedAt, e.worker = now, worker
		best.running.push(e)
		out = append(out, e.job)
		e.job.Recovered = false
	}
	return out, nil
}

// leasedLocked returns the running job under l, or nil if l is not its
// current, unexpired lease. A lease that has expired is lost even before
// the job is reserved again.
func (q *Queue) leasedLocked(l driver.Lease, now int64) *entry {
	e := q.leased[l.Token]
	if e == nil || e.job.ID != l.JobID {
		return nil
	}
	if e.state != queue.StateRunning || e.job.LeaseToken != l.Token {
		// Left by a change that kept the token (a cancel of the running
		// job): forget it now that its lease was presented.
		delete(q.leased, l.Token)
		return nil
	}
	if e.at <= now {
		return nil
	}
	return e
}

// ack marks the job under l as done, keeping its result res, if any. The job is kept for inspection among
// the last WithRetention acked jobs, then deleted. It returns an error
// matching queue.ErrLeaseLost if l is not the job's current lease.
func (q *Queue) ack(ctx context.Context, l driver.Lease, res kept) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: acking job %s: %w", l.JobID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	e := q.leasedLocked(l, now.UnixNano())
	if e == nil {
		return fmt.Errorf("memqueue: acking job %s: %w", l.JobID, queue.ErrLeaseLost)
	}
	q.finishLocked(e, now)
	q.keepResultLocked(l.JobID, res, now, false)
	return nil
}

// finishLocked moves the running job e to the done ring.
func (q *Queue) finishLocked(e *entry, now time.Time) {
	e.nq.running.remove(e.idx)
	q.retireLocked(e, queue.StateDone, now)
}

// retireLocked finishes e, already off its heaps, in state (done or
// cancelled): it frees its key unless the state holds it and keeps it in the ring of retained
// finished jobs, or deletes it when none are retained.
func (q *Queue) retireLocked(e *entry, state driver.JobState, now time.Time) {
	q.leaveSequenceLocked(e)
	q.releaseKeyLocked(e, state)
	e.state = state
	e.nq.unlease(e)
	e.updatedAt = now // and so its finish time
	if q.retention == 0 {
		q.releaseKeyLocked(e, "")
		e.state = ""
		delete(q.jobs, e.job.ID)
		return
	}
	if len(q.done) < q.retention {
		q.done = append(q.done, e)
		return
	}
	old := q.done[q.doneNext]
	// An entry is in jobs exactly while its state is set: every removal
	// and every replacement by a new push clears the state, so this needs
	// no lookup of the ID (a cache miss per ack in a large queue).
	if old.state == queue.StateDone || old.state == queue.StateCancelled {
		q.releaseKeyLocked(old, "")
		old.state = ""
		delete(q.jobs, old.job.ID)
	}
	q.done[q.doneNext] = e
	q.doneNext = (q.doneNext + 1) % q.retention
}

// releaseKeyLocked frees e's unique key if e holds it and, moving to the
// state to ("" when e is deleted), no longer does (Job.HoldsIn).
func (q *Queue) releaseKeyLocked(e *entry, to driver.JobState) {
	if k := e.job.UniqueKey; k != "" && e.nq.unique[k] == e && (to == "" || !e.job.HoldsIn(to)) {
		delete(e.nq.unique, k)
	}
}

// holdsLocked reports whether e, found as the holder of its unique key,
// still holds it: it is still stored and in a state that holds the key.
func (q *Queue) holdsLocked(e *entry) bool {
	return e.state != "" && q.jobs[e.job.ID] == e && e.job.HoldsIn(e.state)
}

// nack releases the job under l for another attempt at retryAt (now if
// retryAt is zero or past), recording reason as its LastError; the job's
// AvailableAt becomes that time. It returns an error matching
// queue.ErrLeaseLost if l is not the job's current lease.
func (q *Queue) nack(ctx context.Context, l driver.Lease, retryAt time.Time, reason string) error {
	return q.release(ctx, "nacking", l, retryAt, func(e *entry) {
		e.job.LastError = reason
		e.failedAttempt(reason, q.now())
	})
}

// release puts the job under l back as available at at (now if at is zero
// or past), after edit has changed what else the release records; doing
// names the operation in errors.
func (q *Queue) release(ctx context.Context, doing string, l driver.Lease, at time.Time, edit func(e *entry)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: %s job %s: %w", doing, l.JobID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	nowN := now.UnixNano()
	e := q.leasedLocked(l, nowN)
	if e == nil {
		return fmt.Errorf("memqueue: %s job %s: %w", doing, l.JobID, queue.ErrLeaseLost)
	}
	e.nq.running.remove(e.idx)
	if at.IsZero() || nanos(at) < nowN {
		at = now
	}
	edit(e)
	e.job.AvailableAt = at
	e.avail = nanos(at)
	e.nq.unlease(e)
	e.updatedAt = now
	q.enqueueLocked(e, nowN)
	return nil
}

// fail moves the job under l to the dead letters with reason as its
// LastError and limit, when above 0, as its MaxAttempts (the attempt
// limit that applied), freeing its unique key. It returns an error matching
// queue.ErrLeaseLost if l is not the job's current lease.
func (q *Queue) fail(ctx context.Context, l driver.Lease, reason string, limit int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: failing job %s: %w", l.JobID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	e := q.leasedLocked(l, now.UnixNano())
	if e == nil {
		return fmt.Errorf("memqueue: failing job %s: %w", l.JobID, queue.ErrLeaseLost)
	}
	q.failLocked(e, reason, limit, now)
	return nil
}

// failLocked moves the running job e to the dead letters, with limit,
// when above 0, as its MaxAttempts: the attempt limit that applied.
func (q *Queue) failLocked(e *entry, reason string, limit int, now time.Time) {
	if limit > 0 {
		e.job.MaxAttempts = limit
	}
	nq := e.nq
	nq.running.remove(e.idx)
	q.releaseKeyLocked(e, queue.StateDead)
	q.deaths++
	e.state = queue.StateDead
	e.deathSeq = q.deaths
	e.job.LastError = reason
	e.failedAttempt(reason, now)
	nq.unlease(e)
	e.updatedAt = now // and so its finish time
	nq.dead[e.job.ID] = e
	if _, release := driver.SequenceOf(e.job); release {
		q.leaveSequenceLocked(e)
	}
}

// ExtendMany extends every lease it can in one critical section and
// returns the leases that were no longer current. It fails as a whole only
// for ctx.
func (q *Queue) ExtendMany(ctx context.Context, leases []driver.Lease, d time.Duration) ([]driver.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: extending %d leases: %w", len(leases), err)
	}
	var lost []driver.Lease
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for _, l := range leases {
		e := q.leasedLocked(l, now.UnixNano())
		if e == nil {
			lost = append(lost, l)
			continue
		}
		q.extendLocked(e, now, d)
	}
	return lost, nil
}

// extendLocked moves the lease expiry of the running job e to now plus d.
func (q *Queue) extendLocked(e *entry, now time.Time, d time.Duration) {
	e.job.LeaseExpiresAt = now.Add(d)
	e.at = nanos(e.job.LeaseExpiresAt)
	e.updatedAt = now
	e.nq.running.fix(e.idx)
}

// maxDeadPage caps one DeadLetters call.
const maxDeadPage = 1000

// DeadLetters lists up to limit dead letters of queueName ("" for every
// queue), most recently failed first. A limit below 1 or above 1000 is
// taken as 1000, as in sqlqueue.
func (q *Queue) DeadLetters(ctx context.Context, queueName string, limit int) ([]queue.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: listing dead letters: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var dead []*entry
	for _, nq := range q.selectQueuesLocked(queueName) {
		for _, e := range nq.dead {
			dead = append(dead, e)
		}
	}
	slices.SortFunc(dead, func(a, b *entry) int { return cmp.Compare(b.deathSeq, a.deathSeq) })
	if limit < 1 || limit > maxDeadPage {
		limit = maxDeadPage
	}
	if len(dead) > limit {
		dead = dead[:limit]
	}
	out := make([]queue.Job, len(dead))
	for i, e := range dead {
		out[i] = e.job
	}
	return out, nil
}

// RetryDead moves the dead letter id back to ready, available now, with
// its attempts reset to zero; its LastError is kept. It returns an error
// matching queue.ErrNotFound if id is not a dead letter, and one matching
// queue.ErrDuplicate (leaving it dead) if its unique key is now held by
// another active job.
func (q *Queue) RetryDead(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: retrying dead letter %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.retryDeadLocked(id, q.now())
}

// retryDeadLocked is RetryDead's critical section.
func (q *Queue) retryDeadLocked(id string, now time.Time) error {
	e := q.jobs[id]
	if e == nil || e.state != queue.StateDead {
		return fmt.Errorf("memqueue: retrying dead letter %s: %w", id, queue.ErrNotFound)
	}
	nq := e.nq
	if k := e.job.UniqueKey; k != "" {
		if holder := nq.unique[k]; holder != nil && holder != e && q.holdsLocked(holder) {
			return fmt.Errorf("memqueue: retrying dead letter %s: %w", id,
				&driver.DuplicateError{ExistingID: holder.job.ID, UniqueKey: k})
		}
		nq.unique[k] = e
	}
	delete(nq.dead, id)
	e.job.Attempts = 0
	e.job.AvailableAt = now
	e.avail = now.UnixNano()
	e.updatedAt = now
	q.enqueueLocked(e, e.avail)
	return nil
}

// ForgetDead deletes the dead letter id. It returns an error matching
// queue.ErrNotFound if id is not a dead letter.
func (q *Queue) ForgetDead(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: forgetting dead letter %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.jobs[id]
	if e == nil || e.state != queue.StateDead {
		return fmt.Errorf("memqueue: forgetting dead letter %s: %w", id, queue.ErrNotFound)
	}
	q.releaseKeyLocked(e, "")
	q.leaveSequenceLocked(e)
	delete(e.nq.dead, id)
	delete(q.jobs, id)
	e.state = ""
	return nil
}

// FlushDead deletes every dead letter of queueName ("" for every queue) and
// reports how many it deleted.
func (q *Queue) FlushDead(ctx context.Context, queueName string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memqueue: flushing dead letters: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, nq := range q.selectQueuesLocked(queueName) {
		for id, e := range nq.dead {
			q.releaseKeyLocked(e, "")
			q.leaveSequenceLocked(e)
			delete(q.jobs, id)
			e.state = ""
			n++
		}
		clear(nq.dead)
	}
	return n, nil
}

// Len reports how many jobs of queueName ("" for every queue) are ready,
// scheduled or running.
func (q *Queue) Len(ctx context.Context, queueName string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memqueue: counting jobs: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, nq := range q.selectQueuesLocked(queueName) {
		n += nq.ready.len() + nq.scheduled.len() + nq.running.len() + nq.grouped() + nq.sequenced()
	}
	return n, nil
}

// Purge deletes the ready and scheduled jobs of queueName ("" for every
// queue), including jobs whose lease has expired, and reports how many it
// removed. Jobs under an unexpired lease and dead letters are left alone.
// A batch's pending member is cancelled instead, kept like other cancelled
// jobs and counted as cancelled in its batch (the callbacks this makes due
// are pushed), so its batch can finish.
func (q *Queue) Purge(ctx context.Context, queueName string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memqueue: purging jobs: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	n := 0
	for _, nq := range q.selectQueuesLocked(queueName) {
		nq.promote(now.UnixNano(), now)
		// The waiting members go first, so that a head purged below
		// puts none of them back on the ready heap.
		n += q.purgeSequencedLocked(nq)
		for _, e := range append(nq.ready.clear(), nq.scheduled.clear()...) {
			n++
			if e.job.Meta[queue.MetaBatch] != "" || e.job.Meta[driver.MetaGraph] != "" {
				e.job.LastError = queue.ErrCancelled.Error()
				q.retireLocked(e, queue.StateCancelled, now)
				q.memberCancelledLocked(e, now)
				q.nodeCancelledLocked(e, now)
				continue
			}
			q.releaseKeyLocked(e, "")
			q.leaveSequenceLocked(e)
			delete(q.jobs, e.job.ID)
			e.state = ""
		}
		for _, g := range nq.groups {
			for _, e := range g.members {
				n++
				delete(q.jobs, e.job.ID)
				e.state = ""
			}
		}
		nq.groups = nil
	}
	return n, nil
}
