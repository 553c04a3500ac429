package driver

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
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
	// jobs do not hold their key unless UniqueStates names their state.
	UniqueKey string
	// UniqueStates, with UniqueKey, names finished states in which the job
	// still holds its key, beyond the active ones (River's ByState):
	// StateDone (while the store keeps done jobs for retention), StateDead
	// and StateCancelled. A push of the key, whatever its own states, is a
	// duplicate while a job of the queue holds it; the hold ends when the
	// job leaves the state (retried, forgotten or pruned). Drivers keep it
	// with the job. A store that cannot hold a key in a state it names
	// refuses the push with an error matching ErrUnsupported (see
	// docs/semantics.md for which stores keep which states).
	UniqueStates []JobState
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
	// Actions, when set, are recorded in the job's history (JobInfo.Actions)
	// as the push stores it, in the push's own transaction or script where
	// the store has one, so a job and the note of who made it are stored
	// together (the dashboard's dispatch and clone). A push that stores
	// nothing (a duplicate) records nothing. At most MaxHistory; an action
	// whose At is zero is dated by the store.
	Actions []Action
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
	// Recovered is set by every reservation (Reserve, ReserveUnstarted,
	// ReserveStarting) on a job taken back from a lease that expired: its
	// last delivery ended with no outcome, because the process that held
	// it died, stalled or lost its lease. The Worker runs such jobs apart
	// from one another (see Worker), so that a crash loop narrows onto the
	// job that causes it.
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

// ErrInvalid reports a job that Push or PushMany refused before storing
// anything, because a field is beyond a limit every driver enforces the
// same way. Retrying the same job cannot succeed. The error is a
// *ValidationError naming the field and the limit.
var ErrInvalid = errors.New("queue: invalid job")

// The limits every driver enforces at push (see Validate). They are the
// smallest the stores allow, so a job accepted by one driver is accepted by
// every other: MariaDB keeps IDs, queue names, job names and unique keys in
// VARCHAR(255) and tags and meta in TEXT (64 KiB), PostgreSQL rejects NUL
// bytes and invalid UTF-8 in text, and priority and max attempts are 32-bit
// integer columns.
const (
	// MaxKeyBytes bounds ID, Queue, Name and UniqueKey, in bytes of UTF-8.
	MaxKeyBytes = 255
	// MaxTagsBytes bounds Tags as the JSON array SQL drivers store.
	MaxTagsBytes = 65535
	// MaxMetaBytes bounds Meta as the JSON object SQL drivers store.
	MaxMetaBytes = 65535
	// MinPriority and MaxPriority bound Priority.
	MinPriority = math.MinInt32
	MaxPriority = math.MaxInt32
	// MaxMaxAttempts bounds MaxAttempts, which may not be negative.
	MaxMaxAttempts = math.MaxInt32
)

// ValidationError is the error Validate and ValidateBatch return, and so
// the error every driver's Push and PushMany return for a job beyond a
// limit. It matches ErrInvalid with errors.Is.
type ValidationError struct {
	// Index is the job's position in a PushMany batch, or -1 for Push.
	Index int
	// JobID is the job's ID as given (empty if the caller left it empty).
	JobID string
	// Field names the Job field at fault: "ID", "Queue", "Name",
	// "UniqueKey", "UniqueStates", "Priority", "MaxAttempts", "Tags", "Meta"
	// or "Payload".
	Field string
	// Limit states the rule the field broke, for example
	// "at most 255 bytes of UTF-8 without NUL".
	Limit string
	// Got describes the value that broke it, for example "300 bytes".
	Got string
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("queue: invalid job")
	if e.Index >= 0 {
		fmt.Fprintf(&b, " at index %d", e.Index)
	}
	if e.JobID != "" && e.Field != "ID" {
		fmt.Fprintf(&b, " %s", e.JobID)
	}
	fmt.Fprintf(&b, ": %s must be %s, got %s", e.Field, e.Limit, e.Got)
	return b.String()
}

// Is makes a ValidationError match ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

const keyLimit = "at most 255 bytes of UTF-8 without NUL"

// Validate checks j against the limits every driver enforces (MaxKeyBytes
// and the others above) and returns a *ValidationError for the first field
// beyond one, or nil. Drivers call it once at the top of Push; custom
// drivers should too, so that a job is refused the same way everywhere:
//
//   - ID, Queue, Name and UniqueKey: at most MaxKeyBytes bytes of valid
//     UTF-8 without NUL (empty ID and Queue are allowed: Push fills them in);
//   - Priority: within int32; MaxAttempts: 0 to MaxInt32;
//   - Tags and Meta: valid UTF-8 (NUL is allowed: it is stored escaped),
//     and at most MaxTagsBytes / MaxMetaBytes bytes as JSON;
//   - Actions: at most MaxHistory, By and What valid UTF-8;
//   - a group member (Meta holds MetaGroup): a group key of 1 to
//     MaxKeyBytes bytes like UniqueKey, no UniqueKey, and a payload that
//     is valid JSON.
//   - a sequence member (Meta holds MetaSequence): a sequence key of 1 to
//     MaxKeyBytes bytes like UniqueKey, on a job that is no group member,
//     batch member or graph node;
//   - UniqueStates: only with a UniqueKey, and only StateDone, StateDead
//     and StateCancelled (the active states always hold the key).
//
// Payload has no limit here: it is bytes, stored as given, up to what the
// store takes in one statement (see docs/semantics.md).
func Validate(j Job) error {
	if err := validate(j); err != nil {
		err.Index = -1
		return err
	}
	return nil
}

// ValidateBatch checks every job of a PushMany batch with Validate's rules
// and returns a *ValidationError whose Index names the first bad job, or
// nil. Drivers call it once at the top of PushMany, so a batch with one bad
// job stores nothing.
func ValidateBatch(jobs []Job) error {
	for i := range jobs {
		if err := validate(jobs[i]); err != nil {
			err.Index = i
			return err
		}
	}
	return nil
}

func validate(j Job) *ValidationError {
	bad := func(field, limit, got string) *ValidationError {
		return &ValidationError{JobID: j.ID, Field: field, Limit: limit, Got: got}
	}
	for _, f := range [...]struct{ name, v string }{
		{"ID", j.ID}, {"Queue", j.Queue}, {"Name", j.Name}, {"UniqueKey", j.UniqueKey},
	} {
		if got := checkKey(f.v); got != "" {
			return bad(f.name, keyLimit, got)
		}
	}
	if got := checkUniqueStates(j); got != "" {
		return bad("UniqueStates", "done, dead or cancelled, with a UniqueKey", got)
	}
	if j.Priority < MinPriority || j.Priority > MaxPriority {
		return bad("Priority", "within int32 (-2147483648 to 2147483647)", fmt.Sprint(j.Priority))
	}
	if j.MaxAttempts < 0 || j.MaxAttempts > MaxMaxAttempts {
		return bad("MaxAttempts", "0 to 2147483647", fmt.Sprint(j.MaxAttempts))
	}
	if len(j.Tags) > 0 {
		n := 1 // [
		for i, tag := range j.Tags {
			if !utf8.ValidString(tag) {
				return bad("Tags", "valid UTF-8", fmt.Sprintf("invalid UTF-8 in tag %d", i))
			}
			n += jsonStringLen(tag) + 1 // , or ]
		}
		if n > MaxTagsBytes {
			return bad("Tags", "at most 65535 bytes as a JSON array", fmt.Sprintf("%d bytes", n))
		}
	}
	if g, ok := j.Meta[MetaGroup]; ok {
		if got := checkKey(g); got != "" || g == "" {
			return bad("Meta", "a group key ("+MetaGroup+") of 1 to 255 bytes of UTF-8 without NUL", cmp.Or(got, "an empty key"))
		}
		if j.UniqueKey != "" {
			return bad("UniqueKey", "empty on a group member", fmt.Sprintf("%q", j.UniqueKey))
		}
		if !json.Valid(j.Payload) {
			return bad("Payload", "valid JSON on a group member (its set's payload is the array of its members')", fmt.Sprintf("%d bytes that are not JSON", len(j.Payload)))
		}
	}
	if got := checkSequence(j); got != "" {
		return bad("Meta", sequenceKeyLimit, got)
	}
	if len(j.Meta) > 0 {
		n := 1 // {
		for k, v := range j.Meta {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return bad("Meta", "valid UTF-8", fmt.Sprintf("invalid UTF-8 in key or value of %q", strings.ToValidUTF8(k, "\uFFFD")))
			}
			n += jsonStringLen(k) + 1 + jsonStringLen(v) + 1 // : and , or }
		}
		if n > MaxMetaBytes {
			return bad("Meta", "at most 65535 bytes as a JSON object", fmt.Sprintf("%d bytes", n))
		}
	}
	if len(j.Actions) > MaxHistory {
		return bad("Actions", fmt.Sprintf("at most %d", MaxHistory), fmt.Sprintf("%d", len(j.Actions)))
	}
	for i, a := range j.Actions {
		if !utf8.ValidString(a.By) || !utf8.ValidString(a.What) {
			return bad("Actions", "valid UTF-8", fmt.Sprintf("invalid UTF-8 in action %d", i))
		}
	}
	return nil
}

// checkUniqueStates describes what is wrong with j's UniqueStates, or
// returns "".
func checkUniqueStates(j Job) string {
	if len(j.UniqueStates) == 0 {
		return ""
	}
	if j.UniqueKey == "" {
		return "states without a unique key"
	}
	for _, s := range j.UniqueStates {
		switch s {
		case StateDone, StateDead, StateCancelled:
		default:
			return fmt.Sprintf("%q", s)
		}
	}
	return ""
}

// HoldsIn reports whether j, in state s, holds its unique key: in the
// active states, and in the finished states its UniqueStates names. A job
// without a unique key holds none.
func (j Job) HoldsIn(s JobState) bool {
	switch {
	case j.UniqueKey == "":
		return false
	case s == StateReady || s == StateScheduled || s == StateRunning:
		return true
	}
	return slices.Contains(j.UniqueStates, s)
}

// checkKey describes what is wrong with an ID-like string, or returns "".
func checkKey(s string) string {
	switch {
	case len(s) > MaxKeyBytes:
		return fmt.Sprintf("%d bytes", len(s))
	case !utf8.ValidString(s):
		return "invalid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "a NUL byte"
	}
	return ""
}

// jsonStringLen is the length of s, valid UTF-8, as encoding/json writes it
// (with HTML escaping, its default), quotes included.
func jsonStringLen(s string) int {
	n := 2
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
			n += 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}

// workerKey is the context key of WithWorker.
type workerKey struct{}

// WithWorker returns a context that names the worker making a Reserve
// call: its WorkerInfo.ID. Drivers that keep an attempt history record it
// with each attempt they hand out (JobInfo.Worker, Attempt.Worker). The
// Worker's fetcher sets it; callers of Reserve need not.
func WithWorker(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, workerKey{}, id)
}

// WorkerOf returns the worker ID WithWorker put in ctx, or "".
func WorkerOf(ctx context.Context) string {
	id, _ := ctx.Value(workerKey{}).(string)
	return id
}

// Fence is one term of a named lease: the lease's name and the epoch it
// had when its holder was elected (Leaser.AcquireLeaseEpoch). A write that
// carries a Fence (WithFence) is refused with ErrFenced by the stores that
// check it once the lease's epoch is no longer Fence.Epoch.
type Fence struct {
	Lease string
	Epoch int64
}

type fenceKey struct{}

// WithFence returns a copy of ctx that carries f. A store checks the Fence
// of a fenced write (Scheduler.ClaimTick) in the write's own
// transaction, with the lease's row locked so that no election passes the
// write by, and refuses the write with ErrFenced when the lease's epoch is
// not f.Epoch.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the Fence ctx carries (see WithFence).
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}
