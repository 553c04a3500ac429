package sqlqueue

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
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

// jobCols lists the columns dialect.scan reads, in order; {xcol} is the
// lease-expiry column (see dialect.leaseColumns).
const jobCols = "id, seq, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta, available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, snoozes, retry_until, state{xcol}"

// jobColsT is jobCols without {xcol}, qualified by the alias t.
const jobColsT = "t.id, t.seq, t.queue, t.name, t.payload, t.priority, t.attempts, t.max_attempts, t.timeout_us, t.unique_key, t.tags, t.meta, t.available_at, t.run_at, t.created_at, t.updated_at, t.finished_at, t.last_error, t.lease_token, t.snoozes, t.retry_until, t.state"

// row is one stored job with the columns the Job type does not carry.
type row struct {
	job queue.Job
	seq int64
	// runAt is when the row may next be claimed: run_at, or the lease
	// expiry while a lease is held (the later of the two).
	runAt      int64
	updatedAt  int64
	finishedAt int64
	state      string
	// decodeErr reports tags or meta that could not be decoded.
	decodeErr error
}

type scanner interface{ Scan(dest ...any) error }

// scanJob reads jobCols without {xcol}, then extra, from sc. A tags or
// meta column that is not valid JSON leaves the field empty and is
// reported in row.decodeErr, not failed: one bad row must not stop a claim
// or a listing.
func scanJob(sc scanner, extra ...any) (row, error) {
	var (
		r                              row
		uniqueKey, leaseToken          sql.NullString
		tags, meta                     string
		timeoutUS, avail, created      int64
		priority, attempts, maxAttempt int64
		snoozes, retryUntil            int64
	)
	dest := []any{&r.job.ID, &r.seq, &r.job.Queue, &r.job.Name, &r.job.Payload, &priority, &attempts, &maxAttempt,
		&timeoutUS, &uniqueKey, &tags, &meta, &avail, &r.runAt, &created, &r.updatedAt, &r.finishedAt,
		&r.job.LastError, &leaseToken, &snoozes, &retryUntil, &r.state}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return row{}, err
	}
	if r.job.Payload == nil {
		r.job.Payload = []byte{}
	}
	r.job.Priority, r.job.Attempts, r.job.MaxAttempts = int(priority), int(attempts), int(maxAttempt)
	r.job.Timeout = time.Duration(timeoutUS) * time.Microsecond
	r.job.Snoozes = int(snoozes)
	r.job.RetryUntil = fromMicros(retryUntil)
	r.job.UniqueKey = uniqueKey.String
	r.job.LeaseToken = leaseToken.String
	r.job.AvailableAt = fromMicros(avail)
	r.job.CreatedAt = fromMicros(created)
	if tags != "" {
		if err := json.Unmarshal([]byte(tags), &r.job.Tags); err != nil {
			r.decodeErr = fmt.Errorf("decoding the tags of job %s: %w", r.job.ID, err)
		}
	}
	if meta != "" {
		if err := json.Unmarshal([]byte(meta), &r.job.Meta); err != nil {
			r.decodeErr = errors.Join(r.decodeErr, fmt.Errorf("decoding the meta of job %s: %w", r.job.ID, err))
		}
	}
	return r, nil
}

// logDecode logs the tags or meta of r that could not be decoded.
func (q *Queue) logDecode(r row) {
	if r.decodeErr != nil {
		q.log.Warn("sqlqueue: a stored job's tags or meta are not valid JSON; read without them", "table", q.t.raw, "job", r.job.ID, "err", r.decodeErr)
	}
}

// expiryColumns are leaseColumns where the lease expiry is in
// lease_expires_at, apart from run_at (every dialect).
func expiryColumns() (expiry, unlease, xcol string) {
	return "lease_expires_at", ", lease_expires_at = 0", ", lease_expires_at"
}

// scanExpiry is dialect.scan of jobCols with lease_expires_at as {xcol}.
func scanExpiry(sc scanner, extra ...any) (row, error) {
	var expiry int64
	r, err := scanJob(sc, append([]any{&expiry}, extra...)...)
	r.runAt = max(r.runAt, expiry)
	r.setLease()
	return r, err
}

// expiryReadyCond is readyCond where the lease expiry is in
// lease_expires_at: the job is due and holds no unexpired lease.
func expiryReadyCond(alias string, now int64) (string, []any) {
	return alias + "run_at <= ? AND " + alias + "lease_expires_at <= ?", []any{now, now}
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
