package contracttest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Harness is what a driver's test gives Run: how to make queues, and what
// the driver lacks.
type Harness struct {
	// New returns a new, empty queue isolated from every other queue New
	// returns (for example a fresh table or database file), for one subtest.
	// It registers its cleanup with t.Cleanup and fails t if it cannot.
	// Run calls it from parallel subtests.
	New func(t *testing.T) queue.Queue

	// Tx, if set, returns a Pusher bound to a new transaction on q's store,
	// with the functions that commit and roll it back (SQL drivers: a
	// *sql.Tx view). Nil skips the transactional-enqueue checks.
	Tx func(t *testing.T, q queue.Queue) (p queue.Pusher, commit, rollback func() error)

	// Peer, if set, returns a second handle on q's store, opened as another
	// process would open it (for SQL drivers, a new *sql.DB on the same
	// database and table). Nil (single-process drivers such as memqueue)
	// skips the cross-process checks.
	Peer func(t *testing.T, q queue.Queue) queue.Queue

	// Maintain, if set, runs one maintenance pass of q's store (sqlqueue's
	// Maintain) from a handle that keeps finished graphs and batches (and
	// dead letters) for keep, and fails t if the pass fails or this
	// handle could not lead it. The suite passes the same keep in every
	// call for one q. Nil: the store needs no pass (it prunes as it
	// goes), and the checks of pruning by time are skipped.
	Maintain func(t *testing.T, q queue.Queue, keep time.Duration)

	// Caps declares what the driver lacks.
	Caps Capabilities
}

// Capabilities declares the parts of the contract a driver may lack or do
// differently. The zero value claims everything: no check is skipped.
// The optional abilities (driver.Inspector, driver.Controller, ...) need no
// flag: Run finds them with driver.CapabilitiesOf and skips the checks of
// those a store lacks, saying what it lacks.
type Capabilities struct {
	// NoDoneRetention, when not empty, says why the driver deletes acked
	// jobs at once instead of keeping them in queue.StateDone for a while.
	// The checks that list or get done (and cancelled) jobs are skipped
	// with this reason, and GetJob of an acked or cancelled job must then
	// return queue.ErrNotFound.
	NoDoneRetention string

	// TimePrecision is the coarsest resolution at which the driver stores
	// times (AvailableAt, CreatedAt, lease expiries). Times are compared
	// with this tolerance. Zero means one millisecond.
	TimePrecision time.Duration

	// NoAttemptHistory, when not empty, says why the driver's GetJob
	// fills neither JobInfo.History nor StartedAt and Worker. The history
	// checks are skipped with this reason.
	NoAttemptHistory string

	// IDsPerQueue, when not empty, says why the driver holds a job ID
	// unique within its queue only, not across queues (redisqueue on a
	// Redis Cluster): the same ID may then be active in two queues, and a
	// dead letter's ID pushed to another queue stores a new job beside it.
	// The checks of IDs across queues are skipped with this reason.
	IDsPerQueue string

	// NoUniqueHold names the finished states in which the driver cannot
	// hold a unique key (driver.Job.UniqueStates), each with why. A push
	// naming one must fail with an error matching queue.ErrUnsupported
	// and store nothing; the checks of that state are skipped with the
	// reason.
	NoUniqueHold map[driver.JobState]string

	// NoFieldSearch, when not empty, says why the driver's payload search
	// takes only one substring: a search with field filters (or several
	// quoted substrings, see driver.ParseSearch) must fail with an error
	// matching queue.ErrUnsupported, and the checks of field filters are
	// skipped with this reason.
	NoFieldSearch string
}

// Timing of the suite. Leases that must expire are short; leases that must
// not are long; waits for something that must happen are bounded by
// patience, which is far longer than any correct driver needs.
const (
	shortLease = 300 * time.Millisecond
	longLease  = 5 * time.Minute
	patience   = 10 * time.Second
	pollEvery  = 10 * time.Millisecond
)

// Run runs the conformance suite against the driver that h makes. Call it
// from one test of the driver's package:
//
//	func TestContract(t *testing.T) {
//		contracttest.Run(t, contracttest.Harness{
//			New: func(t *testing.T) queue.Queue { return memqueue.New() },
//		})
//	}
//
// Every check runs in a parallel subtest on its own queue from h.New, so
// the driver's queues must be isolated from one another.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("contracttest: Harness.New is nil")
	}
	s := &suite{h: h, tol: h.Caps.TimePrecision}
	if s.tol <= 0 {
		s.tol = time.Millisecond
	}
	t.Run("Push", s.testPush)
	t.Run("Order", s.testOrder)
	t.Run("Unique", s.testUnique)
	t.Run("Bytes", s.testBytes)
	t.Run("Reserve", s.testReserve)
	t.Run("LenPurge", s.testLenPurge)
	t.Run("Context", s.testContext)
	t.Run("Lease", s.testLease)
	t.Run("DeadLetters", s.testDeadLetters)
	t.Run("Transaction", s.testTx)
	t.Run("Peer", s.testPeer)
	t.Run("BatchPusher", s.testBatchPusher)
	t.Run("BatchAcker", s.testBatchAcker)
	t.Run("BatchExtender", s.testBatchExtender)
	t.Run("Starter", s.testStarter)
	t.Run("Waiter", s.testWaiter)
	t.Run("Inspector", s.testInspector)
	t.Run("BulkActor", s.testBulkActor)
	t.Run("AttemptHistory", s.testAttemptHistory)
	t.Run("Counter", s.testCounter)
	t.Run("CounterPastCap", s.testCounterPastCap)
	t.Run("CounterScheduled", s.testCounterScheduled)
	t.Run("DeadSince", s.testDeadSince)
	t.Run("Pauser", s.testPauser)
	t.Run("WorkerRegistry", s.testWorkerRegistry)
	t.Run("Fleet", s.testFleet)
	t.Run("Limits", s.testLimits)
	t.Run("Leaser", s.testLeaser)
	t.Run("Canceller", s.testCanceller)
	t.Run("Amender", s.testAmender)
	t.Run("Snoozer", s.testSnoozer)
	t.Run("Complete", s.testComplete)
	t.Run("UniqueModes", s.testUniqueModes)
	t.Run("UniqueStates", s.testUniqueStates)
	t.Run("PeriodicStore", s.testPeriodicStore)
	t.Run("Processes", s.testProcesses)
	t.Run("Chains", s.testChains)
	t.Run("Batches", s.testBatches)
	t.Run("Compose", s.testCompose)
	t.Run("Limiters", s.testLimiters)
	t.Run("RateLimit", s.testRateLimit)
	t.Run("TagMonitor", s.testTagMonitor)
	t.Run("Results", s.testResults)
	t.Run("Graphs", s.testGraphs)
	t.Run("WorkflowEnds", s.testWorkflowEnds)
	t.Run("Groups", s.testGroups)
	t.Run("Sequences", s.testSequences)
}

// suite carries the harness through the checks.
type suite struct {
	h   Harness
	tol time.Duration
}

// check runs fn as a parallel subtest on a new queue.
func (s *suite) check(t *testing.T, name string, fn func(t *testing.T, q queue.Queue)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		q := s.h.New(t)
		if q == nil {
			t.Fatal("contracttest: Harness.New returned nil")
		}
		fn(t, q)
	})
}

var jobCounter atomic.Int64

// newJob returns a job for queueName with a fresh ID, the name "contract"
// and a small JSON payload that is different for every job.
func newJob(queueName string) queue.Job {
	n := jobCounter.Add(1)
	return queue.Job{
		ID:      driver.NewID(),
		Queue:   queueName,
		Name:    "contract",
		Payload: fmt.Appendf(nil, `{"n":%d}`, n),
	}
}

func push(t *testing.T, q queue.Pusher, j queue.Job) {
	t.Helper()
	if err := q.Push(t.Context(), j); err != nil {
		t.Fatalf("Push(job %s, queue %q): %v", j.ID, j.Queue, err)
	}
}

// pushN pushes n new jobs to queueName and returns them in push order.
func pushN(t *testing.T, q queue.Pusher, queueName string, n int) []queue.Job {
	t.Helper()
	jobs := make([]queue.Job, n)
	for i := range jobs {
		jobs[i] = newJob(queueName)
		push(t, q, jobs[i])
	}
	return jobs
}

func reserve(t *testing.T, q queue.Queue, queues []string, max int, lease time.Duration) []queue.Job {
	t.Helper()
	jobs, err := q.Reserve(t.Context(), queues, max, lease)
	if err != nil {
		t.Fatalf("Reserve(%q, %d): %v", queues, max, err)
	}
	if len(jobs) > max {
		t.Fatalf("Reserve(%q, %d) returned %d jobs, more than max", queues, max, len(jobs))
	}
	return jobs
}

// reserveOne reserves from queueName and fails unless exactly one job, the
// one with ID want (if want is not empty), comes back.
func reserveOne(t *testing.T, q queue.Queue, queueName, want string, lease time.Duration) queue.Job {
	t.Helper()
	jobs := reserve(t, q, []string{queueName}, 10, lease)
	if len(jobs) != 1 {
		t.Fatalf("Reserve(%q) returned %d jobs %v, want 1", queueName, len(jobs), ids(jobs))
	}
	if want != "" && jobs[0].ID != want {
		t.Fatalf("Reserve(%q) returned job %s, want %s", queueName, jobs[0].ID, want)
	}
	return jobs[0]
}

// expectNone fails if anything is reservable on queues.
func expectNone(t *testing.T, q queue.Queue, queues ...string) {
	t.Helper()
	if jobs := reserve(t, q, queues, 10, longLease); len(jobs) != 0 {
		t.Fatalf("Reserve(%q) returned jobs %v, want none", queues, ids(jobs))
	}
}

// awaitReserve polls Reserve on queueName until it returns a job, and
// fails after patience.
func awaitReserve(t *testing.T, q queue.Queue, queueName string, lease time.Duration) queue.Job {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		jobs := reserve(t, q, []string{queueName}, 1, lease)
		if len(jobs) == 1 {
			return jobs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no job became reservable on %q within %v", queueName, patience)
		}
		time.Sleep(pollEvery)
	}
}

// awaitReserveNotBefore polls Reserve on queueName until it returns a job
// and fails if that happens before notBefore (less the time tolerance):
// the job was delivered early. It fails after patience. Only a job that
// comes back is judged, so a slow machine cannot fail the check.
func (s *suite) awaitReserveNotBefore(t *testing.T, q queue.Queue, queueName string, notBefore time.Time) queue.Job {
	t.Helper()
	j := awaitReserve(t, q, queueName, longLease)
	if now := time.Now(); now.Before(notBefore.Add(-s.tol)) {
		t.Fatalf("job %s reserved at %v, before %v", j.ID, now, notBefore)
	}
	return j
}

// eventually polls cond until it holds, and fails after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, patience)
		}
		time.Sleep(pollEvery)
	}
}

func ack(t *testing.T, q queue.Queue, j queue.Job) {
	t.Helper()
	if err := ackLease(t.Context(), q, j.Lease()); err != nil {
		t.Fatalf("Ack(job %s): %v", j.ID, err)
	}
}

func nack(t *testing.T, q queue.Queue, j queue.Job, at time.Time, reason string) {
	t.Helper()
	if err := nackLease(t.Context(), q, j.Lease(), at, reason); err != nil {
		t.Fatalf("Nack(job %s): %v", j.ID, err)
	}
}

func fail(t *testing.T, q queue.Queue, j queue.Job, reason string) {
	t.Helper()
	if err := failLease(t.Context(), q, j.Lease(), reason); err != nil {
		t.Fatalf("Fail(job %s): %v", j.ID, err)
	}
}

func length(t *testing.T, q queue.Queue, queueName string) int {
	t.Helper()
	n, err := q.Len(t.Context(), queueName)
	if err != nil {
		t.Fatalf("Len(%q): %v", queueName, err)
	}
	return n
}

func wantLen(t *testing.T, q queue.Queue, queueName string, want int) {
	t.Helper()
	if n := length(t, q, queueName); n != want {
		t.Fatalf("Len(%q) = %d, want %d", queueName, n, want)
	}
}

func deadLetters(t *testing.T, q queue.Queue, queueName string, limit int) []queue.Job {
	t.Helper()
	jobs, err := q.DeadLetters(t.Context(), queueName, limit)
	if err != nil {
		t.Fatalf("DeadLetters(%q, %d): %v", queueName, limit, err)
	}
	return jobs
}

func ids(jobs []queue.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func sortedIDs(jobs []queue.Job) []string {
	out := ids(jobs)
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// wantErr fails unless err matches target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want one matching %v", what, err, target)
	}
}

// near reports whether got is within tol of want.
func (s *suite) near(got, want time.Time) bool {
	d := got.Sub(want)
	return d <= s.tol && d >= -s.tol
}

// wantTime fails unless got is want within the driver's time precision.
func (s *suite) wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !s.near(got, want) {
		t.Fatalf("%s = %v, want %v (tolerance %v)", what, got, want, s.tol)
	}
}

// wantBetween fails unless lo-tol <= got <= hi+tol.
func (s *suite) wantBetween(t *testing.T, what string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo.Add(-s.tol)) || got.After(hi.Add(s.tol)) {
		t.Fatalf("%s = %v, want between %v and %v (tolerance %v)", what, got, lo, hi, s.tol)
	}
}

// cancelled returns a context that is already cancelled.
func cancelled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// holderID is the registry entry through which the checks report the jobs
// they hold (see hold).
const holderID = "contracttest-holder"

// hold reports, when q has a driver.Reporter, that one worker holds
// exactly jobs (each in its queue, as Reserved), as a Worker reports the
// jobs it holds with its heartbeat; with no jobs it reports none. A driver
// may count and list running jobs from what the live workers report (see
// driver.QueueCounts), so the checks that hold jobs through a bare Reserve
// and then count or list the running ones report them first.
func hold(t *testing.T, q queue.Queue, jobs ...queue.Job) {
	t.Helper()
	wr := driver.CapabilitiesOf(q).Reporter
	if wr == nil {
		return
	}
	var held map[string]int
	for _, j := range jobs {
		if held == nil {
			held = map[string]int{}
		}
		held[j.QueueName()]++
	}
	if err := wr.Heartbeat(t.Context(), driver.WorkerInfo{ID: holderID, Host: "contracttest", Queues: slices.Sorted(maps.Keys(held)), Concurrency: 1, Reserved: held}); err != nil {
		t.Fatalf("Heartbeat reporting %d held jobs: %v", len(jobs), err)
	}
}
