package driver

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Job is one unit of work as drivers store it and handlers' middleware see it.
//
// Dispatch builds Jobs from typed values; custom drivers, middleware and the
// dashboard see them directly. A Job is a plain value: drivers copy what they
// keep, and the slices and map it holds are not modified after Push.
type Job struct {
	// ID is unique per enqueue. Push gives an empty ID a new one (NewID).
	ID string
	// Queue is the named queue the job waits on; empty means DefaultQueue.
	Queue string
	// Name is the handler routing key: the Go type name of the dispatched
	// value unless the type names itself (see Namer).
	Name string
	// Payload is the encoded job, normally JSON. Drivers store it as bytes
	// and return it intact, whether or not it is valid JSON.
	Payload []byte
	// Priority orders ready jobs within a reservation: a higher number runs
	// first. The default is 0; use negative numbers for background work.
	Priority int
	// Attempts counts deliveries. Reserve increments it, so a handler sees 1
	// on its first run.
	Attempts int
	// MaxAttempts caps total attempts for this job. Zero means the worker's
	// MaxAttempts setting decides.
	MaxAttempts int
	// Timeout bounds one attempt of this job. Zero means the worker's
	// Timeout setting decides.
	Timeout time.Duration
	// UniqueKey, when set, makes the job unique among active jobs (ready,
	// scheduled or running) of the same queue: pushing a second job with the
	// same key stores nothing and fails with ErrDuplicate. Finished and dead
	// jobs do not hold their key.
	UniqueKey string
	// UniqueFor, when positive, holds UniqueKey for this long after the
	// push even once the job has finished: another push of the key within
	// that time stores nothing and fails with ErrDuplicate (asynq's TTL,
	// Laravel's uniqueFor). Drivers keep it only at push; it is zero on
	// the jobs they return.
	UniqueFor time.Duration
	// UniqueReplace, with UniqueKey, makes a push replace a waiting (ready
	// or scheduled) job that holds the key instead of being a duplicate:
	// that job is deleted and this one stored in its place, in one step
	// (debounce). A key held by a running job is still a duplicate. Drivers
	// keep it only at push.
	UniqueReplace bool
	// RetryUntil, when set, stops retries after it: an attempt that fails
	// after RetryUntil dead-letters the job whatever attempts remain.
	RetryUntil time.Time
	// Snoozes counts the handler's snoozes (see Snooze). Push resets it.
	Snoozes int
	// Tags label the job for filtering in the dashboard.
	Tags []string
	// Meta carries string metadata such as trace context across the queue.
	Meta map[string]string
	// AvailableAt is the earliest delivery time. The zero time means now.
	AvailableAt time.Time
	// CreatedAt is when the job was first pushed; drivers set it when zero.
	CreatedAt time.Time
	// LastError is the error of the latest failed attempt, if any.
	LastError string
	// LeaseToken is set by Reserve and must be echoed by Complete and
	// ExtendMany (in the Job's Lease). It is empty on jobs that are not
	// reserved.
	LeaseToken string
	// LeaseExpiresAt is when the current lease runs out; after it the job may
	// be reserved again by anyone. Zero on jobs that are not reserved.
	LeaseExpiresAt time.Time
	// Recovered is set by Reserve (and ReserveUnstarted) on a job taken back
	// from a lease that expired: its last delivery ended with no outcome,
	// because the process that held it died, stalled or lost its lease. The
	// Worker runs such jobs apart from one another (see Worker), so that a
	// crash loop narrows onto the job that causes it.
	Recovered bool
}

// Lease names one reservation of a job: its ID and the token Reserve gave it.
func (j Job) Lease() Lease { return Lease{JobID: j.ID, Token: j.LeaseToken} }

// Lease identifies one reservation of one job. A lease is valid until it
// expires or an outcome of the job is recorded under it; after that every
// call that presents it reports it lost (ErrLeaseLost) and changes nothing
// for it.
type Lease struct {
	JobID string
	Token string
}

// DefaultQueue is the queue a job goes to when none is named.
const DefaultQueue = "default"

// NewID returns a new random job ID: 32 hex digits, time-ordered in its
// first 12 so that IDs sort roughly by creation (as UUIDv7 does).
func NewID() string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	b[0] = byte(ms >> 40)
	b[1] = byte(ms >> 32)
	b[2] = byte(ms >> 24)
	b[3] = byte(ms >> 16)
	b[4] = byte(ms >> 8)
	b[5] = byte(ms)
	_, _ = rand.Read(b[6:])
	return hex.EncodeToString(b[:])
}

// NewToken returns a new random lease token.
func NewToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// QueueName returns j.Queue, or DefaultQueue when it is empty.
func (j Job) QueueName() string {
	if j.Queue == "" {
		return DefaultQueue
	}
	return j.Queue
}

// WaitStart returns when j became available to run: its AvailableAt, or
// its CreatedAt when AvailableAt is zero. The wait of an attempt is the
// time from WaitStart to the handler's start.
func (j Job) WaitStart() time.Time {
	if j.AvailableAt.IsZero() {
		return j.CreatedAt
	}
	return j.AvailableAt
}
