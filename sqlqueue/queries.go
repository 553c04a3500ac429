package sqlqueue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"
)

// query names one whole statement of the dialect seam: an operation whose
// SQL is fixed but for its bind parameters. Each dialect writes its own
// text of every query in its files (dialect_<name>*.go) as a template that
// names the queue's tables in braces ({jobs}, {counts}, ...) and marks its
// parameters with ?; New renders the templates once per Queue (see
// render), and shared code runs them by name (Queue.stmt), never building
// SQL text of its own. Statements whose shape depends on the call (lists,
// searches, bulk selections, the claim and the batched acks) are built by
// the dialect's operations instead.
type query int

// The named statements. Each comment says what the statement does and
// what it takes, in order; the dialects' texts must agree with it.
const (
	// qSchemaVersion reads the recorded schema version from {meta}.
	qSchemaVersion query = iota
	// qCounts reads the counts table summed by queue and state (queue,
	// state, sum), non-zero sums only, sorted by queue then state.
	qCounts
	// qKnownQueues lists the queues whose count in state (the argument)
	// is positive, sorted, at most maxStatsQueues.
	qKnownQueues
	// qFinishedQueues lists (queue, count) of the queues with a positive
	// count in state (the argument), sorted by queue.
	qFinishedQueues
	// qScheduledCounts reads the counts of the scheduled buckets (queue,
	// bucket state, sum), non-zero sums only.
	qScheduledCounts
	// qPruneScheduledCounts deletes the bucket rows of shard 0 left at
	// zero.
	qPruneScheduledCounts
	// qPaused lists the paused queues; qPausedSorted sorted by name.
	qPaused
	qPausedSorted
	// qPause pauses a queue (queue, paused_at) unless it is paused.
	qPause
	// qResume unpauses a queue (queue).
	qResume
	// qStatsMetrics sums the metrics rows by queue since a minute (the
	// rate window's start, then the stats window's start): queue,
	// processed, failed, runtime total, runtime max, wait total, and the
	// processed jobs since the rate window's start.
	qStatsMetrics
	// qMetrics reads the metrics rows since a minute, oldest first, at
	// most 100,000 (the column names are StructScan's).
	qMetrics
	// qMetricsUpsert adds to one metrics row (queue, minute, processed,
	// failed, runtime total, runtime max, wait total), keeping the larger
	// maximum.
	qMetricsUpsert
	// qPruneMetrics deletes the metrics rows before a minute.
	qPruneMetrics
	// qWorkerUpsert creates or refreshes one worker row (id, host, pid,
	// queues, concurrency, started_at, last_seen, running, reserved).
	qWorkerUpsert
	// qWorkerDelete deletes one worker row (id).
	qWorkerDelete
	// qWorkers lists the worker rows seen since a time, by id, at most
	// 1000 (the column names are StructScan's).
	qWorkers
	// qWorkersHeld reads (running, reserved) of the worker rows seen
	// since a time that hold jobs, at most maxHeldWorkers.
	qWorkersHeld
	// qPruneWorkers deletes the worker rows last seen before a time.
	qPruneWorkers
	// qGetJob reads one job (id): jobCols then attemptCols.
	qGetJob
	// qJobsByID reads the jobs of an ID list (one IN list): jobCols.
	qJobsByID
	// qPriorities lists the distinct priorities of one queue's pending
	// jobs (queue, queue), highest first, at most maxPriorities+1. A
	// dialect that steps the scan itself leaves it empty.
	qPriorities
	// qUniquesHeld reads (queue, unique_key) of the holds of a key list
	// (one IN list) that end after a time.
	qUniquesHeld
	// qUniqueDeleteEnded deletes one ended hold (queue, key, now).
	qUniqueDeleteEnded
	// qUniqueTake takes a hold (queue, key, expires_at) unless one exists.
	qUniqueTake
	// qUniqueRelease gives one hold back (queue, key, expires_at).
	qUniqueRelease
	// qPruneUniques deletes the holds that ended before a time.
	qPruneUniques
	// qFinishedBatches lists up to 100 IDs of batches finished before a
	// time, oldest first.
	qFinishedBatches
	// qDeleteBatchMembers and qDeleteBatches delete the member rows and
	// the rows of a list of batches (one IN list).
	qDeleteBatchMembers
	qDeleteBatches
	// qDeadLetters lists dead letters (limit), newest failure first;
	// qDeadLettersOf those of one queue (queue, limit).
	qDeadLetters
	qDeadLettersOf
	// qLen counts the pending jobs; qLenOf those of one queue (queue).
	qLen
	qLenOf
	// qPendingMembers lists the waiting jobs that are pending members of a
	// batch; qPendingMembersOf those of one queue (queue).
	qPendingMembers
	qPendingMembersOf
	// qFoldCounts moves the counts of the shards no open transaction
	// holds into shard 0, in one statement (PostgreSQL). qFoldShards
	// reads and locks those shards (queue, state, shard, n) and qFoldAdd
	// adds to shard 0 (queue, state, n), where folding takes a
	// transaction (MySQL). SQLite writes shard 0 only and has none.
	qFoldCounts
	qFoldShards
	qFoldAdd
	// The statements of batches (batch.go): each does what its name and
	// its text say, the same on every dialect.
	qBatchInsert
	qBatchAddTotal
	qBatchTouch
	qBatchEnds
	qBatchRules
	qBatchAddCounters
	qBatchCancel
	qBatchCatch
	qBatchThen
	qBatchFinally
	qBatchCallbacks
	qBatchByID
	qBatches
	qBatchesAfter
	qMemberSetState
	qMembersCancel
	qMemberCancel
	qMembersCancelled
	qMembers
	qMembersInState
	// The statements of the lease rows in {meta} and of periodic jobs'
	// ticks (control.go), as their texts say.
	qLeaseRowInsert
	qLeaseAcquire
	qLeaseRelease
	qPeriodicInsert
	qPeriodicUpdate
	qPeriodicLastTick
	qPeriodicTick
	qPeriodicClearJob
	qPeriodicList
	// qJob reads one job (id): jobCols.
	qJob
	// qJobState reads one job's state (id); qPendingByKey the ID of the
	// pending job of a queue holding a unique key (queue, key);
	// qNotPendingOfIDs the IDs of an ID list (one IN list) whose jobs are
	// finished or dead.
	qJobState
	qPendingByKey
	qNotPendingOfIDs
	// qHasReady finds a ready job (1) of a list of queues (one IN list)
	// that are not paused (the list, now, now).
	qHasReady

	// The writes of the jobs table (the dialects' *_writes.go). "The
	// lease" is three parameters: the job's ID, the lease token and now;
	// the statement changes the job only while that lease is current
	// (pending under the token, not expired). Statements with a list
	// mark take a list of n (see stmtN).

	// qClaim leases up to a limit of ready jobs in one statement
	// (PostgreSQL): (queues, now, now, queues again for the pause check,
	// limit, attempts to add, token, lease expiry, now, now, worker),
	// returning pgClaimCols.
	qClaim
	// qClaimProbe finds a ready job (1) of a list of queues (queues, now,
	// now) before a claim takes the write lock (SQLite).
	qClaimProbe
	// qClaimSelect reads the ready jobs a claim takes (queues, now, now,
	// limit; jobCols), locking them where the dialect locks rows, and
	// qClaimUpdate leases them by the key the dialect finds rows by
	// (attempts to add, token, lease expiry, now, now, worker, keys): the
	// claim of MySQL and SQLite, in one write transaction.
	qClaimSelect
	qClaimUpdate

	// The lease-guarded changes of one job, each (its arguments, then the
	// lease): qAckDelete deletes it (); qAckDone marks it done (now, now);
	// qRetryLeased releases it for another attempt, appending the attempt
	// to its history (now, the history's error, run at, run at, reason,
	// now); qDeadLeased dead-letters it likewise (now, the history's
	// error, reason, now, now); qCancelLeased cancels it (error, now,
	// now); qSnoozeLeased puts it back giving its attempt back (snoozes
	// to add, run at, run at, now).
	qAckDelete
	qAckDone
	qRetryLeased
	qDeadLeased
	qCancelLeased
	qSnoozeLeased

	// The lease-guarded changes of many jobs (finishLeases), each taking
	// its arguments, then the leases as its dialect takes them, then now:
	// qStartLeases counts an attempt and dates its start (now, now);
	// qAckLeases deletes the jobs (); qDoneLeases marks them done (now,
	// now); qExtendLeases moves their lease expiry (expiry, now). Each
	// returns the (id, lease_token) of the jobs it changed, except on
	// MySQL, whose changes return no rows.
	qStartLeases
	qAckLeases
	qDoneLeases
	qExtendLeases
	// qStartAckLeases and qStartDoneLeases are qStartLeases and
	// qAckLeases (qDoneLeases) in one statement, returning (part, id,
	// lease_token), the part 0 or 1 (PostgreSQL).
	qStartAckLeases
	qStartDoneLeases
	// The same changes matching each (id, token) pair in SQL, where the
	// statements above match tokens alone (SQLite: the leases as two
	// text-array literals, see pgArray).
	qStartLeasesPairs
	qAckLeasesPairs
	qDoneLeasesPairs
	qExtendLeasesPairs
	// The same changes by primary key (their arguments, then the IDs),
	// once qLockLeases has locked and read the rows still under their
	// leases (ids, (id, token) pairs, now), and qAckLeasesReturning, a
	// deletion returning the (id, lease_token) of the rows it deleted, by
	// ID and token lists (ids, tokens, now): MySQL and MariaDB.
	qStartByID
	qAckByID
	qDoneByID
	qExtendByID
	qLockLeases
	qAckLeasesReturning

	// qInsertJobs inserts n jobs (insertParams each: see insertArgs),
	// skipping those whose ID or unique key is taken, returning the IDs
	// it inserted where the dialect can; qInsertJobsNotify does the same
	// and returns a NULL row when it inserted any, having notified the
	// listeners (channel, payload after the rows: PostgreSQL); qNotify
	// notifies them (channel, payload). qInsertJob inserts one job,
	// failing on a taken key (insertArgs, its created_at given).
	qInsertJobs
	qInsertJobsNotify
	qNotify
	qInsertJob
	// qJobsInserted lists the IDs of an ID list (one IN list) present;
	// qJobsInsertedSince those whose seq is at least a value (MySQL).
	qJobsInserted
	qJobsInsertedSince
	// qRevive moves a finished or dead job back to pending in place, after
	// the last insertion, unless its queue holds its unique key pending
	// (queue, name, payload, priority, max attempts, timeout, unique key,
	// tags, meta, available at, run at, now, keep created (1/0), created
	// at, retry until, id, queue, unique key). MySQL revives by
	// qReviveLock (id: created_at, state), qDeleteJob (id) and qInsertJob.
	qRevive
	qReviveLock
	qDeleteJob
	// qReplaceWaiting deletes the waiting job holding a unique key (queue,
	// key, the pushed job's id): a Replace push.
	qReplaceWaiting

	// qRetryDead moves a dead letter back to pending with its attempts
	// reset (now, now, now, id); qRetryDeadIn those of an ID list (now,
	// now, now, ids). qForgetDead deletes a dead letter (id);
	// qForgetDeadIn those of an ID list (ids). qCancelJob cancels a
	// pending job (now, now, error, id); qCancelJobsIn those of an ID
	// list (now, now, error, ids). qDeleteWaitingIn deletes the waiting
	// jobs of an ID list (ids); qDeleteInState the jobs of an ID list in
	// a state (ids, state).
	qRetryDead
	qRetryDeadIn
	qForgetDead
	qForgetDeadIn
	qCancelJob
	qCancelJobsIn
	qDeleteWaitingIn
	qDeleteInState
	// qDeadIDs, qDeadIDsOf (queue), qWaitingIDs and qWaitingIDsOf (queue)
	// list up to pruneBatch IDs of dead letters and of waiting jobs.
	qDeadIDs
	qDeadIDsOf
	qWaitingIDs
	qWaitingIDsOf
	// qLeaseEpoch reads a lease row's epoch (name); qLeaseEpochLocked
	// also locks the row until the write transaction ends.
	qLeaseEpoch
	qLeaseEpochLocked
	// qInsertMembers adds n pending members to a batch (n batch_id,
	// job_id pairs), skipping those already in it.
	qInsertMembers
	// qChangedRowsProbe changes no row of {meta}: the rows it reports
	// affected tell whether the connection counts matched rows or changed
	// ones (MySQL). qFoldDelete deletes n count shards ((queue, state,
	// shard) triples: MySQL's foldCounts).
	qChangedRowsProbe
	qFoldDelete
	// qVacuumDue reads whether the jobs table is due a vacuum and an
	// analyze (minimum dead rows, seconds since the last analyze, the
	// table's name); qVacuum and qVacuumAnalyze vacuum it (PostgreSQL).
	qVacuumDue
	qVacuum
	qVacuumAnalyze

	numQueries
)

// queryTemplates is a dialect's text of some of the named statements.
type queryTemplates map[query]string

// renderedQueries is one Queue's statements: the dialect's templates
// with the table names in place, as run (placeholders rebound) and, for
// statements with an IN list that sqlx.In expands per call, with ?
// placeholders. A template with a list mark ({list ...}: see
// expandLists) is kept in in only, with its ? placeholders: its text
// depends on the count of its list (stmtN).
type renderedQueries struct {
	run   [numQueries]string
	in    [numQueries]string
	lists sync.Map // listKey -> the statement as run
}

// listKey names one expansion of a statement with list marks.
type listKey struct {
	id query
	n  int
}

// render puts the table names of t into each of a dialect's templates
// and rebinds their placeholders. A template naming a table the Queue
// has not got is a bug, reported by the tests of every dialect.
func render(d dialect, t tableNames, sets ...queryTemplates) *renderedQueries {
	r := &renderedQueries{}
	for _, set := range sets {
		for id, tmpl := range set {
			text := t.replacer.Replace(tmpl)
			r.in[id] = text
			if !strings.Contains(text, listMark) {
				r.run[id] = d.rebind(text)
			}
		}
	}
	return r
}

// listMark opens a list mark in a template: "{list G}" stands for n
// copies of G separated by ", ", n being the count the statement is run
// with (stmtN). G holds no brace: "IN ({list ?})" is an IN list of n
// parameters, "VALUES {list (?, ?, 'pending')}" n rows.
const listMark = "{list "

// expandLists replaces every list mark of text with n copies of its
// group.
func expandLists(text string, n int) string {
	var b strings.Builder
	for {
		i := strings.Index(text, listMark)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		end := strings.IndexByte(text[i:], '}')
		if end < 0 {
			panic("sqlqueue: unclosed list mark in " + text)
		}
		group := text[i+len(listMark) : i+end]
		b.WriteString(text[:i])
		for k := range n {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString(group)
		}
		text = text[i+end+1:]
	}
}

// stmt returns the text of the named statement, as run.
func (q *Queue) stmt(id query) string {
	s := q.qs.run[id]
	if s == "" {
		panic(fmt.Sprintf("sqlqueue: the %s dialect has no statement %d", q.d.name(), id))
	}
	return s
}

// stmtN returns the text of the named statement whose lists (see
// listMark) hold n elements each, as run. Each count's text is built
// once per Queue.
func (q *Queue) stmtN(id query, n int) string {
	k := listKey{id, n}
	if s, ok := q.qs.lists.Load(k); ok {
		return s.(string)
	}
	tmpl := q.qs.in[id]
	if !strings.Contains(tmpl, listMark) {
		panic(fmt.Sprintf("sqlqueue: the %s dialect has no list statement %d", q.d.name(), id))
	}
	s := q.d.rebind(expandLists(tmpl, n))
	q.qs.lists.Store(k, s)
	return s
}

// stmtIn returns the named statement with its IN list expanded for args
// (one slice argument) by sqlx.In, and the flattened arguments.
func (q *Queue) stmtIn(id query, args ...any) (string, []any, error) {
	if q.qs.in[id] == "" {
		panic(fmt.Sprintf("sqlqueue: the %s dialect has no statement %d", q.d.name(), id))
	}
	text, args, err := sqlx.In(q.qs.in[id], args...)
	if err != nil {
		return "", nil, err
	}
	return q.d.rebind(text), args, nil
}

// unrendered reports the named statements a dialect's templates leave
// out or that still hold a brace after rendering, for the tests.
func unrendered(r *renderedQueries, optional ...query) []string {
	var bad []string
	for id := range numQueries {
		s := expandLists(r.in[id], 1)
		switch {
		case s == "" && !slices.Contains(optional, id):
			bad = append(bad, fmt.Sprintf("%d missing", id))
		case strings.Contains(s, "{"):
			bad = append(bad, fmt.Sprintf("%d: %s", id, s))
		}
	}
	return bad
}

// Bounds of the inspection statements, as SQL literals.
var (
	maxStatsQueuesLit = strconv.Itoa(maxStatsQueues)
	maxHeldWorkersLit = strconv.Itoa(maxHeldWorkers)
	maxPrioritiesLit  = strconv.Itoa(maxPriorities + 1)
	pruneBatchLit     = strconv.Itoa(pruneBatch)
)
