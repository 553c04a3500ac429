package sqlqueue

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// The states stored in the state column. A pending job is ready,
// scheduled or running depending on run_at (the job's available-at) and its
// lease expiry, which has a column of its own, lease_expires_at (0 when no
// lease is held): a claim changes no indexed column, and a job whose lease
// expired is claimed again at its own place in the claim order (priority,
// run_at, seq), not behind the jobs queued after it.
const (
	statePending = "pending"
	stateDone    = "done"
	stateDead    = "dead"
	// stateCancelled is a job cancelled before it finished. A job
	// cancelled while it ran keeps its lease token, so the worker that
	// holds it can find it (CancelledSince).
	stateCancelled = "cancelled"
)

// jobCols lists the columns a jobScanner reads, in order, on every
// dialect: the statements that read whole jobs select them.
const jobCols = "id, seq, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta, available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, snoozes, retry_until, state, lease_expires_at"

// row is one stored job with the columns the Job type does not carry.
type row struct {
	job queue.Job
	seq int64
	// runAt is when the row may next be claimed: run_at, or the lease
	// expiry while a lease is held (the later of the two).
	runAt int64
	// dueAt is run_at as stored, whether or not a lease is held.
	dueAt      int64
	updatedAt  int64
	finishedAt int64
	state      string
	// decodeErr reports tags or meta that could not be decoded.
	decodeErr error
}

type scanner interface{ Scan(dest ...any) error }

// jobScanner reads rows of jobCols into
// row values. Its scan destinations are made once and reused for every
// row: a claim of 1,000 rows scans 1,000 times into the same 23 targets
// instead of allocating each row's targets and its destination list.
type jobScanner struct {
	f    jobFields
	dest []any
}

// jobFields are the scan targets of the columns a row does not hold in
// its own type.
type jobFields struct {
	r                              row
	uniqueKey, leaseToken          sql.NullString
	tags, meta                     string
	timeoutUS, avail, created      int64
	priority, attempts, maxAttempt int64
	snoozes, retryUntil, expiry    int64
}

// newJobScanner returns a scanner of jobCols rows followed by the columns
// extra point to.
func newJobScanner(extra ...any) *jobScanner {
	s := &jobScanner{}
	f := &s.f
	s.dest = append([]any{&f.r.job.ID, &f.r.seq, &f.r.job.Queue, &f.r.job.Name, &f.r.job.Payload, &f.priority, &f.attempts, &f.maxAttempt,
		&f.timeoutUS, &f.uniqueKey, &f.tags, &f.meta, &f.avail, &f.r.runAt, &f.created, &f.r.updatedAt, &f.r.finishedAt,
		&f.r.job.LastError, &f.leaseToken, &f.snoozes, &f.retryUntil, &f.r.state, &f.expiry}, extra...)
	return s
}

// scan reads one row from sc. A tags or meta column that is not valid
// JSON leaves the field empty and is reported in row.decodeErr, not
// failed: one bad row must not stop a claim or a listing.
func (s *jobScanner) scan(sc scanner) (row, error) {
	f := &s.f
	f.r = row{}
	if err := sc.Scan(s.dest...); err != nil {
		return row{}, err
	}
	r := f.r
	r.job.UniqueKey = f.uniqueKey.String
	r.job.LeaseToken = f.leaseToken.String
	r.dueAt = r.runAt
	r.runAt = max(r.runAt, f.expiry)
	f.decode(&r)
	r.setLease()
	return r, nil
}

// decode fills the job's fields that are stored in another form than the
// Job type's: numbers as int64, times as microseconds, tags and meta as
// JSON text.
func (f *jobFields) decode(r *row) {
	if r.job.Payload == nil {
		r.job.Payload = []byte{}
	}
	r.job.Priority, r.job.Attempts, r.job.MaxAttempts = int(f.priority), int(f.attempts), int(f.maxAttempt)
	r.job.Timeout = time.Duration(f.timeoutUS) * time.Microsecond
	r.job.Snoozes = int(f.snoozes)
	r.job.RetryUntil = fromMicros(f.retryUntil)
	r.job.AvailableAt = fromMicros(f.avail)
	r.job.CreatedAt = fromMicros(f.created)
	if f.tags != "" {
		if err := json.Unmarshal([]byte(f.tags), &r.job.Tags); err != nil {
			r.decodeErr = fmt.Errorf("decoding the tags of job %s: %w", r.job.ID, err)
		}
	}
	if f.meta != "" {
		if err := json.Unmarshal([]byte(f.meta), &r.job.Meta); err != nil {
			r.decodeErr = errors.Join(r.decodeErr, fmt.Errorf("decoding the meta of job %s: %w", r.job.ID, err))
		}
	}
}

// logDecode logs the tags or meta of r that could not be decoded.
func (q *Queue) logDecode(r row) {
	if r.decodeErr != nil {
		q.log.Warn("sqlqueue: a stored job's tags or meta are not valid JSON; read without them", "table", q.t.raw, "job", r.job.ID, "err", r.decodeErr)
	}
}

// scanJob reads one row of jobCols (then extra); read many with one
// jobScanner.
func scanJob(sc scanner, extra ...any) (row, error) {
	return newJobScanner(extra...).scan(sc)
}

// setLease sets the job's lease expiry from runAt once runAt is final.
func (r *row) setLease() {
	if r.job.LeaseToken != "" {
		r.job.LeaseExpiresAt = fromMicros(r.runAt)
	}
}

// info turns a row into the inspection view, deriving the state at now.
func (r row) info(now int64) queue.JobInfo {
	ji := queue.JobInfo{Job: r.job, UpdatedAt: fromMicros(r.updatedAt), FinishedAt: fromMicros(r.finishedAt)}
	switch {
	case r.state == stateDone:
		ji.State = queue.StateDone
	case r.state == stateDead:
		ji.State = queue.StateDead
	case r.state == stateCancelled:
		ji.State = queue.StateCancelled
	case r.runAt <= now:
		ji.State = queue.StateReady
	case r.job.LeaseToken != "":
		ji.State = queue.StateRunning
	default:
		ji.State = queue.StateScheduled
	}
	if ji.State != queue.StateRunning {
		ji.LeaseToken = ""
		ji.LeaseExpiresAt = time.Time{}
	}
	return ji
}

// encodeTags and encodeMeta store tags and meta as JSON text; empty is "".
// Marshalling strings and maps of strings cannot fail.
func encodeTags(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	b, _ := json.Marshal(tags)
	return string(b)
}

func encodeMeta(meta map[string]string) string {
	if len(meta) == 0 {
		return ""
	}
	b, _ := json.Marshal(meta)
	return string(b)
}
