package sqlqueue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

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

	numQueries
)

// queryTemplates is a dialect's text of some of the named statements.
type queryTemplates map[query]string

// renderedQueries is one Queue's statements: the dialect's templates
// with the table names in place, as run (placeholders rebound) and, for
// statements with an IN list that sqlx.In expands per call, with ?
// placeholders.
type renderedQueries struct {
	run [numQueries]string
	in  [numQueries]string
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
			r.run[id] = d.rebind(text)
		}
	}
	return r
}

// stmt returns the text of the named statement, as run.
func (q *Queue) stmt(id query) string {
	s := q.qs.run[id]
	if s == "" {
		panic(fmt.Sprintf("sqlqueue: the %s dialect has no statement %d", q.d.name(), id))
	}
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
		s := r.run[id]
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
)
