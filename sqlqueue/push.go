package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

// insertCols and insertRow are the columns and one row of the insertion of
// a new job (qInsertJobs, qInsertJob): 15 parameters per row (the
// constants are literals to leave room for more rows per chunk), given by
// insertArgs.
const (
	insertCols   = "id, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta, available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, retry_until, state"
	insertRow    = "(?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, '', NULL, ?, 'pending')"
	insertParams = 15
	// heldCols, heldRow and heldParams are insertCols, insertRow and
	// insertParams with unique_hold: the insertion of a job that names
	// UniqueStates (qInsertJobsHeld, qInsertJobHeld). Only such jobs
	// write the column, so the pushes of every other job run the same
	// statements against a table one schema version down.
	heldCols   = insertCols + ", unique_hold"
	heldRow    = "(?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, '', NULL, ?, 'pending', ?)"
	heldParams = insertParams + 1
	// maxChunkRows and maxChunkBytes bound one multi-row insertion besides
	// the dialect's parameter limit (MySQL's max_allowed_packet is 16 MiB
	// by default on MariaDB, 64 MiB on MySQL 8).
	maxChunkRows  = 2000
	maxChunkBytes = 4 << 20
)

// statements runs the SQL of a push on a database/sql handle or on a
// transaction database/sql does not own (see hook.Statements).
type statements = hook.Statements

// sqlStatements adapts a database/sql handle (DB, Tx or Conn).
type sqlStatements struct{ ex execer }

func (s sqlStatements) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.ex.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (s sqlStatements) Query(ctx context.Context, query string, args ...any) (hook.Rows, error) {
	rows, err := s.ex.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// stmts returns the statements of a database/sql handle.
func stmts(ex execer) statements { return sqlStatements{ex} }

// Push stores j (see queue.Pusher). A duplicate returns a
// *queue.DuplicateError naming the active job that holds the ID or key.
// Pushing the ID of a dead letter (or of a finished job kept for
// retention) replaces it with j, pending again with its attempts reset.
// On PostgreSQL a stored job wakes listeners through pg_notify, sent after
// Push returns (see NotifyChannel).
//
// Pushes made at once from many goroutines are coalesced: while the
// Queue's push lanes are busy (WithPushLanes) a Push waits and then goes
// with the others waiting as one multi-row insertion, each answered as
// if alone (pushgroup.go). A Push whose context ends while it waits
// stores nothing; one whose context ends once its group runs returns the
// context's error, and its job may be stored. A push that takes a
// UniqueFor hold or replaces a job (it needs a transaction) always runs
// alone.
func (q *Queue) Push(ctx context.Context, j queue.Job) error {
	if err := queue.Validate(j); err != nil {
		return err
	}
	if err := q.use(ctx); err != nil {
		return err
	}
	lanes := q.lanes()
	if holdsInTx([]queue.Job{j}) {
		lanes = 0 // alone, in a transaction of its own
	}
	ownID := j.ID == ""
	if ownID {
		j.ID = queue.NewID()
	}
	return q.group.Push(ctx, groupPusher{q}, lanes, j, ownID)
}

// PushMany stores jobs with Push's rules, a multi-row insertion per chunk that
// skips duplicates (ON CONFLICT DO NOTHING, or its MySQL equivalent), and
// reports per job whether it was stored. A later job that repeats an
// earlier job's ID or unique key in the same batch is skipped. Jobs
// without an ID get one.
func (q *Queue) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	if err := queue.ValidateBatch(jobs); err != nil {
		return nil, err
	}
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	var stored []bool
	var committed bool // the push ran in a transaction, which notified with it
	chunks := len(q.chunksOf(jobs))
	if holdsInTx(jobs) {
		chunks = max(chunks, 2) // pushBatch's "needs a transaction"
	}
	err := q.againOnConflict(ctx, func() error {
		return q.d.pushBatch(ctx, q, len(jobs), chunks, func(ex statements, inTx bool) error {
			var err error
			committed = inTx
			stored, err = q.pushMany(ctx, ex, inTx, jobs)
			return err
		})
	})
	if err != nil {
		return nil, q.wrap(ctx, err, "pushing %d jobs", len(jobs))
	}
	q.wakeFor(jobs, stored)
	if !committed {
		q.announce(jobs, stored)
	}
	return stored, nil
}

// conflictTries is how many times a push the server rolled back to break a
// deadlock is run in all.
const conflictTries = 3

// againOnConflict runs push, a push (or a claim) in a transaction of q's
// own (never a caller's), again when the server rolled it back whole to
// break a deadlock: MariaDB's row triggers on the counts table can meet
// another transaction's in lock order, and a claim's locking read can meet
// a batch ack's rows. Nothing of a rolled-back try was stored, so a new
// try cannot store a job (or lease one) twice.
func (q *Queue) againOnConflict(ctx context.Context, push func() error) error {
	for try := 1; ; try++ {
		err := push()
		if err == nil || try == conflictTries || ctx.Err() != nil || !q.d.isConflict(err) {
			return err
		}
	}
}

// wakeFor wakes this process's waiters (Wait) for the stored jobs: now for
// those available now, at their time for the others.
func (q *Queue) wakeFor(jobs []queue.Job, stored []bool) {
	for i, j := range jobs {
		if stored[i] {
			q.wake.at(j.AvailableAt)
		}
	}
}

// TxPusher pushes jobs inside the caller's transaction: they become visible
// to workers if and only if the caller commits. It is a queue.Pusher and a
// queue.BatchPusher, so Dispatch, Enqueue and DispatchMany work with it. It
// is valid while the transaction is open and, like the transaction, must
// not be used by several goroutines at once.
type TxPusher struct {
	q  *Queue
	st statements
}

// Tx returns a Pusher bound to the caller's transaction tx: a *sql.Tx, a
// *sqlx.Tx, or anything with their ExecContext and QueryContext. On
// PostgreSQL the wake-up notification is sent on commit.
//
// On SQLite the database has one connection, which tx holds: use only the
// TxPusher (not q itself) until tx ends, or the call waits for ever.
func (q *Queue) Tx(tx execer) *TxPusher { return &TxPusher{q: q, st: stmts(tx)} }

// txStatements returns a Pusher bound to a transaction that database/sql
// does not own, through s: the transaction's statements and its commit
// decide, as with Tx. sqlqueue/postgres uses it for pgx.Tx.
func (q *Queue) txStatements(s statements) *TxPusher { return &TxPusher{q: q, st: s} }

// Push stores j in the transaction with Queue.Push's rules.
func (p *TxPusher) Push(ctx context.Context, j queue.Job) error {
	if err := queue.Validate(j); err != nil {
		return err
	}
	if err := p.q.useTx(ctx, p.st); err != nil {
		return err
	}
	return p.q.pushOne(ctx, p.st, true, j)
}

// PushMany stores jobs in the transaction with Queue.PushMany's rules.
func (p *TxPusher) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	if err := queue.ValidateBatch(jobs); err != nil {
		return nil, err
	}
	if err := p.q.useTx(ctx, p.st); err != nil {
		return nil, err
	}
	stored, err := p.q.pushMany(ctx, p.st, true, jobs)
	if err != nil {
		return nil, p.q.wrap(ctx, err, "pushing %d jobs in a transaction", len(jobs))
	}
	return stored, nil
}

func (q *Queue) pushOne(ctx context.Context, ex statements, inTx bool, j queue.Job) error {
	if j.ID == "" {
		j.ID = queue.NewID()
	}
	stored, err := q.pushMany(ctx, ex, inTx, []queue.Job{j})
	if err != nil {
		return q.wrap(ctx, err, "pushing job %s", j.ID)
	}
	if stored[0] {
		return nil
	}
	dup, err := q.duplicateOf(ctx, ex, j)
	if err != nil {
		return q.wrap(ctx, err, "looking up the holder of job %s", j.ID)
	}
	return dup
}

// duplicateOf names the active job that kept j from being stored.
func (q *Queue) duplicateOf(ctx context.Context, ex statements, j queue.Job) (*queue.DuplicateError, error) {
	var state string
	err := queryRow(ctx, ex, q.stmt(qJobState), []any{j.ID}, &state)
	if err == nil && (state == statePending || state == stateGrouped || state == stateSequenced) {
		return &queue.DuplicateError{ExistingID: j.ID}, nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	dup := &queue.DuplicateError{UniqueKey: j.UniqueKey}
	if j.UniqueKey != "" {
		err := queryRow(ctx, ex, q.stmt(qPendingByKey),
			[]any{j.QueueName(), j.UniqueKey}, &dup.ExistingID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
	}
	return dup, nil
}

// queryRow runs a one-row query on ex and scans it.
func queryRow(ctx context.Context, ex statements, query string, args []any, dest ...any) error {
	rows, err := ex.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// queryStrings runs a query returning one string column.
func queryStrings(ctx context.Context, ex statements, query string, args ...any) ([]string, error) {
	rows, err := ex.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// pushMany is the push of jobs on ex, unwrapped errors. It inserts in
// chunks skipping conflicts, revives dead letters whose IDs were pushed,
// and sends one notification if anything was stored.
func (q *Queue) pushMany(ctx context.Context, ex statements, inTx bool, jobs []queue.Job) ([]bool, error) {
	now := time.Now()
	js := make([]queue.Job, len(jobs))
	keepCreated := make([]bool, len(jobs))
	for i, j := range jobs {
		js[i] = normalize(j, now)
		keepCreated[i] = j.CreatedAt.IsZero()
	}
	u, err := q.takeUniques(ctx, ex, js, now)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return q.pushFree(ctx, ex, inTx, js, keepCreated, now)
	}
	// Push only the jobs no hold refused, then give back the holds taken
	// for jobs that were not stored.
	var free []queue.Job
	var freeKeep []bool
	var at []int
	for i := range js {
		if !u.refused[i] {
			free, freeKeep, at = append(free, js[i]), append(freeKeep, keepCreated[i]), append(at, i)
		}
	}
	stored := make([]bool, len(js))
	if len(free) > 0 {
		got, err := q.pushFree(ctx, ex, inTx, free, freeKeep, now)
		if err != nil {
			return nil, err
		}
		for k, i := range at {
			stored[i] = got[k]
		}
	}
	if err := q.releaseUniques(ctx, ex, js, u, stored); err != nil {
		return nil, err
	}
	return stored, nil
}

// pushFree is pushMany once the unique holds are settled.
func (q *Queue) pushFree(ctx context.Context, ex statements, inTx bool, js []queue.Job, keepCreated []bool, now time.Time) ([]bool, error) {
	stored := make([]bool, len(js))
	// Outside a transaction the caller announces the push after it
	// (announce); inside one, the notification must commit with it (a
	// dialect without notifications never reports one sent, and its
	// notifyTx does nothing).
	notified := !inTx
	for _, c := range q.chunksOf(js) {
		n, err := q.insertChunk(ctx, ex, js[c.start:c.end], stored[c.start:c.end], now, !notified, c.held)
		if err != nil {
			return nil, err
		}
		notified = notified || n
	}
	revived, err := q.revive(ctx, ex, inTx, js, keepCreated, stored, now)
	if err != nil {
		return nil, err
	}
	if err := q.markGrouped(ctx, ex, js, stored); err != nil {
		return nil, err
	}
	if err := q.markSequenced(ctx, ex, js, stored); err != nil {
		return nil, err
	}
	if err := q.noteActions(ctx, ex, js, stored, now); err != nil {
		return nil, err
	}
	if revived && !notified {
		if err := q.d.notifyTx(ctx, q, ex, js, stored); err != nil {
			return nil, err
		}
	}
	return stored, nil
}

// chunk is one insertion of a push: jobs[start:end], which all name
// UniqueStates (held: qInsertJobsHeld) or none do (qInsertJobs).
type chunk struct {
	start, end int
	held       bool
}

// chunksOf splits jobs into the insertions a push makes, in order: under
// the dialect's parameter limit, maxChunkRows and maxChunkBytes of
// payload, and never mixing jobs that name UniqueStates with jobs that do
// not.
func (q *Queue) chunksOf(jobs []queue.Job) []chunk {
	var out []chunk
	for start := 0; start < len(jobs); {
		held := len(jobs[start].UniqueStates) > 0
		params := insertParams
		if held {
			params = heldParams
		}
		perChunk := min(q.d.maxParams()/params-2, maxChunkRows)
		end, size := start, 0
		for end < len(jobs) && end-start < perChunk && (end == start || size+len(jobs[end].Payload) <= maxChunkBytes) &&
			(len(jobs[end].UniqueStates) > 0) == held {
			size += len(jobs[end].Payload)
			end++
		}
		out = append(out, chunk{start, end, held})
		start = end
	}
	return out
}

// normalize applies Push's defaults to j.
func normalize(j queue.Job, now time.Time) queue.Job {
	if j.ID == "" {
		j.ID = queue.NewID()
	}
	j.Queue = j.QueueName()
	if j.AvailableAt.IsZero() {
		j.AvailableAt = now
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = now
	}
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	return j
}

// insertChunk inserts js in one statement, skipping rows whose ID or unique
// key is taken, and marks in stored the ones it inserted. With notify (a
// push inside the caller's transaction, on a dialect that notifies) the
// same statement sends the push's notification when it inserted anything
// (notified reports it). held: every job of js names UniqueStates.
func (q *Queue) insertChunk(ctx context.Context, ex statements, js []queue.Job, stored []bool, now time.Time, notify, held bool) (notified bool, err error) {
	inserted, notified, err := q.d.insertJobs(ctx, q, ex, js, now, notify, held)
	if err != nil {
		return false, err
	}
	for i, j := range js {
		if inserted[j.ID] {
			stored[i] = true
			delete(inserted, j.ID) // a repeated ID in the batch was not stored twice
		}
	}
	return notified, nil
}

// insertArgs are the arguments of the insertion of js (insertRow's, row
// after row) at now; held: heldRow's, for jobs that name UniqueStates.
func insertArgs(js []queue.Job, now time.Time, held bool) []any {
	args := make([]any, 0, len(js)*heldParams)
	for _, j := range js {
		args = appendInsertArgs(args, j, micros(j.CreatedAt), now)
		if held {
			args = append(args, uniqueHold(j))
		}
	}
	return args
}

// uniqueHold is j's unique_hold column: its UniqueStates as ",dead,done,"
// (sorted, each once), which the unique index reads, or NULL for none.
func uniqueHold(j queue.Job) any {
	if len(j.UniqueStates) == 0 {
		return nil
	}
	states := make([]string, len(j.UniqueStates))
	for i, st := range j.UniqueStates {
		states[i] = string(st)
	}
	slices.Sort(states)
	return "," + strings.Join(slices.Compact(states), ",") + ","
}

// appendInsertArgs appends insertRow's arguments for j, created at
// created, to args.
func appendInsertArgs(args []any, j queue.Job, created int64, now time.Time) []any {
	avail := micros(j.AvailableAt)
	return append(args, j.ID, j.Queue, j.Name, j.Payload, j.Priority, j.MaxAttempts, j.Timeout.Microseconds(),
		nullString(j.UniqueKey), encodeTags(j.Tags), encodeMeta(j.Meta), avail, avail, created, micros(now), micros(j.RetryUntil))
}

// insertReturning runs an insertion returning the IDs it stored and
// collects them; a NULL row says the statement also notified.
func insertReturning(ctx context.Context, ex statements, query string, args []any) (inserted map[string]bool, notified bool, err error) {
	rows, err := ex.Query(ctx, query, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	inserted = make(map[string]bool, len(args)/insertParams)
	for rows.Next() {
		var id sql.NullString
		if err := rows.Scan(&id); err != nil {
			return nil, false, err
		}
		if !id.Valid {
			notified = true
			continue
		}
		inserted[id.String] = true
	}
	return inserted, notified, rows.Err()
}

// markGrouped moves the stored group members of js (jobs with
// queue.MetaGroup) to the grouped state, where no claim takes them, with
// one statement in the push's transaction (holdsInTx gives every push of a
// member one). A push without members runs no statement here.
func (q *Queue) markGrouped(ctx context.Context, ex statements, js []queue.Job, stored []bool) error {
	var ids []string
	for i, j := range js {
		if stored[i] && queue.GroupKeyOf(j) != "" {
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	query, args, err := q.stmtIn(qGroupMark, ids)
	if err != nil {
		return err
	}
	_, err = ex.Exec(ctx, query, args...)
	return err
}

// noteActions records the Actions of the stored jobs of js in their
// history, one qAmendNote each, in the push's transaction (holdsInTx
// gives every push of such a job one). A push of jobs without actions
// runs no statement here.
func (q *Queue) noteActions(ctx context.Context, ex statements, js []queue.Job, stored []bool, now time.Time) error {
	for i, j := range js {
		if !stored[i] {
			continue
		}
		for _, a := range j.Actions {
			a = a.Dated(now)
			if _, err := ex.Exec(ctx, q.stmt(qAmendNote), micros(a.At), a.By, a.What, j.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// revive moves back to pending the finished or dead jobs whose IDs were
// pushed again and not stored by the insert. A revived job takes a new
// insertion position; a dead letter pushed back without a CreatedAt keeps
// its own (keepCreated[i]), a finished job's ID starts a new job.
func (q *Queue) revive(ctx context.Context, ex statements, inTx bool, js []queue.Job, keepCreated, stored []bool, now time.Time) (revived bool, err error) {
	var ids []string
	seen := make(map[string]bool)
	for i, j := range js {
		if !stored[i] && !seen[j.ID] {
			seen[j.ID] = true
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		return false, nil
	}
	query, args, err := q.stmtIn(qNotPendingOfIDs, ids)
	if err != nil {
		return false, err
	}
	finished, err := queryStrings(ctx, ex, query, args...)
	if err != nil || len(finished) == 0 {
		return false, err
	}
	for i, j := range js {
		if stored[i] || !slices.Contains(finished, j.ID) {
			continue
		}
		ok, err := q.d.revive(ctx, q, ex, inTx, j, keepCreated[i], now)
		if err != nil {
			return revived, err
		}
		if ok {
			stored[i], revived = true, true
			finished = slices.DeleteFunc(finished, func(id string) bool { return id == j.ID })
		}
	}
	return revived, nil
}

// reviveInPlace revives j's row with one statement (qRevive) that also
// moves it to the end of the insertion order. The unique key is checked
// in the statement, so a held key skips the row instead of failing (which
// would abort the caller's transaction on PostgreSQL).
func (q *Queue) reviveInPlace(ctx context.Context, ex statements, j queue.Job, keepCreated bool, now time.Time) (bool, error) {
	avail := micros(j.AvailableAt)
	keep := 0
	if keepCreated {
		keep = 1
	}
	args := []any{j.Queue, j.Name, j.Payload, j.Priority, j.MaxAttempts, j.Timeout.Microseconds(), nullString(j.UniqueKey),
		encodeTags(j.Tags), encodeMeta(j.Meta), avail, avail, micros(now), keep, micros(j.CreatedAt), micros(j.RetryUntil), j.ID, j.Queue, nullString(j.UniqueKey)}
	stmt := qRevive
	if len(j.UniqueStates) > 0 {
		// The held statement also writes unique_hold, and looks for
		// finished jobs of the key that hold it too (but j's own row).
		stmt = qReviveHeld
		args = append(args[:len(args)-3], uniqueHold(j), j.ID, j.Queue, nullString(j.UniqueKey), j.ID)
	}
	n, err := ex.Exec(ctx, q.stmt(stmt), args...)
	if q.d.isUniqueViolation(err) {
		return false, nil // its unique key is held by an active job
	}
	return n == 1, err
}

// notifyPayload lists the queues of js (those stored, when stored is not
// nil), one per line, or is empty when the list is too long for a
// notification.
func notifyPayload(js []queue.Job, stored []bool) string {
	var queues []string
	for i, j := range js {
		if (stored == nil || stored[i]) && !slices.Contains(queues, j.Queue) {
			queues = append(queues, j.Queue)
		}
	}
	payload := strings.Join(queues, "\n")
	if len(payload) > maxNotifyPayload {
		payload = ""
	}
	return payload
}

// maxNotifyPayload is the longest notification payload sent; a longer one
// is sent empty (any queue). PostgreSQL refuses payloads of 8000 bytes.
const maxNotifyPayload = 7000

// NotifyChannel is the PostgreSQL channel on which pushes announce new
// jobs: the table name followed by "_ready". A notification's payload is
// the names of queues that received jobs, one per line; an empty payload
// means any queue. Other dialects send nothing.
//
// A push through a TxPusher notifies inside the caller's transaction
// (delivered on commit, nothing on rollback; one notification per
// insertion that stored a job, never one per row). Queue.Push and
// Queue.PushMany notify after their commit instead, from one goroutine per
// Queue on a connection of its own: a transaction that notifies holds a
// database-wide lock through its commit's WAL flush, so notifying inside
// every push would serialise all pushes. Pushes made while a notification
// is being sent are coalesced into the next one, which names all their
// queues; a push that stores nothing notifies nothing.
func (q *Queue) NotifyChannel() string { return q.t.raw + "_ready" }

// copyRows is hook.Queue's CopyRows (sqlqueue/postgres's COPY).
func (q *Queue) copyRows(jobs []queue.Job) (table string, columns []string, rows [][]any) {
	now := time.Now()
	columns = strings.Split(insertCols, ", ")
	rows = make([][]any, len(jobs))
	for i, j := range jobs {
		j = normalize(j, now)
		avail := micros(j.AvailableAt)
		rows[i] = []any{j.ID, j.Queue, j.Name, j.Payload, int64(j.Priority), int64(0), int64(j.MaxAttempts), j.Timeout.Microseconds(),
			nullString(j.UniqueKey), encodeTags(j.Tags), encodeMeta(j.Meta), avail, avail, micros(j.CreatedAt), micros(now),
			int64(0), "", nil, micros(j.RetryUntil), statePending}
	}
	return q.t.raw, columns, rows
}

// announce queues the notification of the stored jobs of js (all of them
// when stored is nil), sent after the push returns, on dialects that
// notify.
func (q *Queue) announce(js []queue.Job, stored []bool) { q.d.announce(q, js, stored) }

// waitAnnounced waits until the notifications of finished pushes are sent.
func (q *Queue) waitAnnounced() { q.announcer.wg.Wait() }

// Unique keys beyond the jobs table's own index (which holds the key of an
// active job): a UniqueFor push also records the key in the uniques table
// until the hold expires, and every push of a key checks that table; a
// Replace push first deletes the waiting job holding its key. Both change
// more than one row, so a push with either runs in a write transaction
// (holdsInTx).

// holdsInTx reports whether a push of js needs a transaction of its own:
// some job takes a UniqueFor hold or replaces a waiting job.
func holdsInTx(js []queue.Job) bool {
	for _, j := range js {
		if queue.GroupKeyOf(j) != "" {
			return true // members are stored pending, then marked grouped
		}
		if len(j.Actions) > 0 {
			return true // stored, then their history written
		}
		if j.Meta[queue.MetaSequence] != "" {
			return true // members are stored pending, then seated (markSequenced)
		}
		if j.UniqueKey != "" && (j.UniqueFor > 0 || j.UniqueReplace) {
			return true
		}
	}
	return false
}

// uniqueHolds is what takeUniques did for a push.
type uniqueHolds struct {
	refused []bool  // the job's key is held by a live UniqueFor hold
	taken   []int64 // expiry of the hold taken for the job, 0 for none
}

// takeUniques settles the unique keys of js before their insert: it
// deletes the waiting jobs Replace pushes displace, refuses jobs whose key
// a live UniqueFor hold keeps, and takes the holds of UniqueFor jobs. It
// returns nil when no job has a unique key.
func (q *Queue) takeUniques(ctx context.Context, ex statements, js []queue.Job, now time.Time) (*uniqueHolds, error) {
	var keys []string
	for _, j := range js {
		if j.UniqueKey != "" {
			keys = append(keys, j.UniqueKey)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	nowUS := micros(now)
	for _, j := range js {
		if j.UniqueKey == "" || !j.UniqueReplace {
			continue
		}
		// A job with a lease token is running (or was, until its lease is
		// reclaimed): it keeps its key.
		if _, err := ex.Exec(ctx, q.stmt(qReplaceWaiting), j.Queue, j.UniqueKey, j.ID); err != nil {
			return nil, err
		}
	}
	query, args, err := q.stmtIn(qUniquesHeld, keys, nowUS)
	if err != nil {
		return nil, err
	}
	rows, err := ex.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	held := make(map[[2]string]bool)
	for rows.Next() {
		var qn, k string
		if err := rows.Scan(&qn, &k); err != nil {
			rows.Close()
			return nil, err
		}
		held[[2]string{qn, k}] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	u := &uniqueHolds{refused: make([]bool, len(js)), taken: make([]int64, len(js))}
	for i, j := range js {
		if j.UniqueKey == "" {
			continue
		}
		key := [2]string{j.Queue, j.UniqueKey}
		if held[key] {
			u.refused[i] = true
			continue
		}
		if j.UniqueFor <= 0 {
			continue
		}
		if _, err := ex.Exec(ctx, q.stmt(qUniqueDeleteEnded), j.Queue, j.UniqueKey, nowUS); err != nil {
			return nil, err
		}
		until := nowUS + j.UniqueFor.Microseconds()
		n, err := ex.Exec(ctx, q.stmt(qUniqueTake), j.Queue, j.UniqueKey, until)
		if err != nil {
			return nil, err
		}
		if n == 0 { // taken by a concurrent push
			u.refused[i] = true
			continue
		}
		u.taken[i] = until
		held[key] = true // a later job of the batch with the key is refused
	}
	return u, nil
}

// releaseUniques gives back the holds takeUniques took for jobs that were
// not stored (their key was held by an active job, or their ID taken).
func (q *Queue) releaseUniques(ctx context.Context, ex statements, js []queue.Job, u *uniqueHolds, stored []bool) error {
	for i, j := range js {
		if u.taken[i] == 0 || stored[i] {
			continue
		}
		if _, err := ex.Exec(ctx, q.stmt(qUniqueRelease), j.Queue, j.UniqueKey, u.taken[i]); err != nil {
			return err
		}
	}
	return nil
}
