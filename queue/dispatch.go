package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Namer is implemented by job types that choose their own routing key
// instead of their Go type name. The method must work on the zero value.
type Namer interface {
	JobName() string
}

// NameOf returns the routing key for values of type T: T's JobName if T (or
// *T) implements Namer, else T's Go type name without its package.
func NameOf[T any]() string {
	var zero T
	if n, ok := any(zero).(Namer); ok {
		return n.JobName()
	}
	if n, ok := any(&zero).(Namer); ok {
		return n.JobName()
	}
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// nameOfValue is NameOf for the dynamic type of v.
func nameOfValue(v any) string {
	if n, ok := v.(Namer); ok {
		return n.JobName()
	}
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.Name()
}

// Option sets a field of the Job that Dispatch builds.
type Option func(*Job)

// OnQueue sends the job to the named queue instead of DefaultQueue.
func OnQueue(name string) Option { return func(j *Job) { j.Queue = name } }

// Delay makes the job available d from now.
func Delay(d time.Duration) Option {
	return func(j *Job) { j.AvailableAt = time.Now().Add(d) }
}

// At makes the job available at t.
func At(t time.Time) Option { return func(j *Job) { j.AvailableAt = t } }

// Priority sets the job's priority: higher runs first.
func Priority(p int) Option { return func(j *Job) { j.Priority = p } }

// Unique sets the job's unique key: while an active job of the same queue
// holds key, dispatching another is skipped (Dispatch returns nil, Enqueue
// reports a duplicate). States in also keep the key held once the job is
// in them as well (see Job.UniqueStates): Unique(k, StateDone,
// StateDead) skips a dispatch of k while an earlier job of k is
// kept done by retention or waits as a dead letter. Only done, dead and
// cancelled may be named; a store that cannot hold a key in one refuses
// the dispatch with an error matching ErrUnsupported.
func Unique(key string, also ...driver.JobState) Option {
	return func(j *Job) {
		j.UniqueKey = key
		j.UniqueStates = withStates(j.UniqueStates, also)
	}
}

// withStates returns have with the states of also it lacks, in order.
func withStates(have, also []driver.JobState) []driver.JobState {
	for _, s := range also {
		if !slices.Contains(have, s) {
			have = append(slices.Clip(have), s)
		}
	}
	return have
}

// UniqueFor is Unique(key) with the key held for d after the push, even
// once the job has finished (see Job.UniqueFor). An empty key keeps the
// key another option gives: with UniqueByPayload, the payload's key is
// held for d.
func UniqueFor(key string, d time.Duration) Option {
	return func(j *Job) {
		if key != "" {
			j.UniqueKey = key
		}
		j.UniqueFor = d
	}
}

// UniqueByPayload makes the job unique among active jobs of its queue by
// its name and payload: the key is "payload:" and a SHA-256 of both, so
// two dispatches of equal values are one job. When the job type tags
// fields `meridian:"unique"`, only those fields count: their JSON names
// and values (top-level fields of a struct, in declaration order), so
// values that differ elsewhere are duplicates. NewJob derives the key
// after every option, so their order does not matter; UniqueFor("", d)
// and Replace("") hold the same key for a period or replace its waiting
// holder. States in also hold the key in those states as well, as with
// Unique.
func UniqueByPayload(also ...driver.JobState) Option {
	return func(j *Job) {
		j.UniqueKey = byPayload
		j.UniqueStates = withStates(j.UniqueStates, also)
	}
}

// byPayload is the unique key UniqueByPayload leaves for NewJob to
// replace with the derived one. A NUL byte makes it a key no caller can
// mean: the drivers refuse keys that hold one.
const byPayload = "\x00payload"

// payloadKey is the unique key UniqueByPayload derives for v, encoded as
// payload under name: from v's fields tagged `meridian:"unique"` when it
// has any, else from the whole payload.
func payloadKey(name string, v any, payload []byte) (string, error) {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	fields, err := uniqueFields(v)
	if err != nil {
		return "", err
	}
	if fields == nil {
		h.Write(payload)
	}
	for _, f := range fields {
		h.Write([]byte(f.name))
		h.Write([]byte{0})
		h.Write(f.value)
		h.Write([]byte{0})
	}
	return "payload:" + hex.EncodeToString(h.Sum(nil)), nil
}

// uniqueField is one field of a job's value that its unique key covers:
// its JSON name and JSON-encoded value.
type uniqueField struct {
	name  string
	value []byte
}

// uniqueFields returns v's top-level fields tagged `meridian:"unique"`,
// in declaration order, or nil when v is no struct (or pointer to one) or
// tags none. A meridian tag of another value is an error, so a typo does
// not silently widen the key to the whole payload.
func uniqueFields(v any) ([]uniqueField, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil, nil
	}
	t := rv.Type()
	var out []uniqueField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("meridian")
		if !ok {
			continue
		}
		if tag != "unique" {
			return nil, fmt.Errorf("queue: field %s of %s has the tag meridian:%q; the only one is meridian:\"unique\"", sf.Name, t, tag)
		}
		if !sf.IsExported() {
			return nil, fmt.Errorf("queue: field %s of %s is tagged unique but not exported, so it is not in the payload", sf.Name, t)
		}
		b, err := json.Marshal(rv.Field(i).Interface())
		if err != nil {
			return nil, fmt.Errorf("queue: encoding the unique field %s of %s: %w", sf.Name, t, err)
		}
		out = append(out, uniqueField{name: jsonName(sf), value: b})
	}
	return out, nil
}

// jsonName is the name encoding/json gives the struct field sf.
func jsonName(sf reflect.StructField) string {
	if tag, ok := sf.Tag.Lookup("json"); ok {
		if name, _, _ := strings.Cut(tag, ","); name != "" && name != "-" {
			return name
		}
	}
	return sf.Name
}

// Replace is Unique(key) where a second push replaces the waiting job that
// holds key, taking its place with the new payload and run time (debounce;
// see Job.UniqueReplace). An empty key keeps the key another option gives
// (UniqueByPayload).
func Replace(key string) Option {
	return func(j *Job) {
		if key != "" {
			j.UniqueKey = key
		}
		j.UniqueReplace = true
	}
}

// MaxAttempts caps this job's total attempts, overriding the worker's
// MaxRetry.
func MaxAttempts(n int) Option { return func(j *Job) { j.MaxAttempts = n } }

// Timeout bounds each attempt of this job, overriding the worker's Timeout.
func Timeout(d time.Duration) Option { return func(j *Job) { j.Timeout = d } }

// Tags adds tags to the job, after those its type derives (Tagger).
func Tags(tags ...string) Option {
	return func(j *Job) { j.Tags = append(j.Tags, tags...) }
}

// Meta sets one metadata entry on the job.
func Meta(key, value string) Option {
	return func(j *Job) {
		if j.Meta == nil {
			j.Meta = make(map[string]string)
		}
		j.Meta[key] = value
	}
}

// NewJob encodes v as JSON and builds the Job that Dispatch would push, with
// a new ID, without pushing it. The options v's type sets by its methods
// (QueueNamer, AttemptsLimiter, TimeoutSetter, Tagger) apply first; opts override
// them. The job is named for T (NameOf), or for v's dynamic type when T is
// an interface (an unnamed type's jobs are named "", and reach the handler
// registered for that type).
func NewJob[T any](v T, opts ...Option) (Job, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return Job{}, fmt.Errorf("queue: encoding %s: %w", NameOf[T](), err)
	}
	name := NameOf[T]()
	if name == "" {
		// T is an interface (or an unnamed type): name the job for the
		// value's own type, as Handle names the handler for it.
		name = nameOfValue(v)
	}
	j := Job{ID: driver.NewID(), Name: name, Payload: payload}
	typeDefaults(v, &j)
	for _, o := range opts {
		o(&j)
	}
	if j.UniqueKey == byPayload {
		if j.UniqueKey, err = payloadKey(name, v, payload); err != nil {
			return Job{}, err
		}
	}
	if j.Queue == "" {
		j.Queue = DefaultQueue
	}
	if j.Meta != nil {
		j.Meta = maps.Clone(j.Meta)
	}
	j.Tags = uniqueTags(j.Tags)
	return j, nil
}

// Enqueue encodes v as JSON and pushes it. It returns the stored job's ID and
// whether the push was skipped as a duplicate; for a duplicate the ID is the
// active job's that holds the key when the driver reports it, else the new
// job's that was not stored.
func Enqueue[T any](ctx context.Context, p Pusher, v T, opts ...Option) (id string, duplicate bool, err error) {
	j, err := NewJob(v, opts...)
	if err != nil {
		return "", false, err
	}
	if err := checkGroup(p, &j); err != nil {
		return "", false, err
	}
	if err := checkSequence(p, &j); err != nil {
		return "", false, err
	}
	err = p.Push(ctx, j)
	if errors.Is(err, ErrDuplicate) {
		var de *driver.DuplicateError
		if errors.As(err, &de) && de.ExistingID != "" {
			return de.ExistingID, true, nil
		}
		return j.ID, true, nil
	}
	if err != nil {
		return "", false, err
	}
	return j.ID, false, nil
}

// Dispatch encodes v as JSON and pushes it as a job named for T. A push
// skipped because of a unique key is not an error: Dispatch returns nil.
// Use Enqueue to learn the ID or whether it was a duplicate.
func Dispatch[T any](ctx context.Context, p Pusher, v T, opts ...Option) error {
	_, _, err := Enqueue(ctx, p, v, opts...)
	return err
}

// DispatchMany encodes and pushes every value with the same options, using
// the driver's batch insert when it has one (BatchPusher). Duplicates are
// skipped. It returns how many jobs were stored.
func DispatchMany[T any](ctx context.Context, p Pusher, vs []T, opts ...Option) (int, error) {
	jobs := make([]Job, 0, len(vs))
	for _, v := range vs {
		j, err := NewJob(v, opts...)
		if err != nil {
			return 0, err
		}
		jobs = append(jobs, j)
	}
	return PushMany(ctx, p, jobs)
}

// PushMany pushes jobs through the driver's batch insert when p is a
// BatchPusher, else one Push at a time. Jobs without an ID get one.
// Duplicates are skipped; it returns how many jobs were stored.
func PushMany(ctx context.Context, p Pusher, jobs []Job) (int, error) {
	if len(jobs) == 0 {
		return 0, nil
	}
	for i := range jobs {
		if jobs[i].ID == "" {
			jobs[i].ID = driver.NewID()
		}
		if err := checkGroup(p, &jobs[i]); err != nil {
			return 0, err
		}
		if err := checkSequence(p, &jobs[i]); err != nil {
			return 0, err
		}
	}
	if bp, ok := p.(driver.BatchPusher); ok {
		stored, err := bp.PushMany(ctx, jobs)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, s := range stored {
			if s {
				n++
			}
		}
		return n, nil
	}
	n := 0
	for _, j := range jobs {
		err := p.Push(ctx, j)
		switch {
		case errors.Is(err, ErrDuplicate):
		case err != nil:
			return n, err
		default:
			n++
		}
	}
	return n, nil
}

// CancelJob cancels the job id on q (see driver.Controller.Cancel) and returns the
// state it was in. It returns an error matching ErrUnsupported when q cannot
// cancel jobs.
func CancelJob(ctx context.Context, q Queue, id string) (driver.JobState, error) {
	caps := driver.CapabilitiesOf(q)
	c := caps.Controller
	if c == nil {
		return "", fmt.Errorf("queue: cancelling job %s: %w", id, caps.Require("Controller"))
	}
	return c.Cancel(ctx, id)
}

// Handler results that control the job rather than report a failure.

// snoozeError asks the Worker to snooze the job.
type snoozeError struct {
	d       time.Duration
	counted bool
}

func (e *snoozeError) Error() string { return fmt.Sprintf("queue: job snoozed for %s", e.d) }

// Snooze, returned by a handler, runs its job again after d without
// counting the attempt (River's JobSnooze, Laravel's release()). Each job
// may snooze Worker.MaxSnoozes times; a snooze beyond that counts as a
// failed attempt and is retried with the worker's backoff.
func Snooze(d time.Duration) error { return &snoozeError{d: max(d, 0), counted: true} }

// SnoozeUncounted is Snooze for limiters: the snooze does not count toward
// Worker.MaxSnoozes. Use it only where something else bounds the snoozes
// (a rate or concurrency limit that frees up), never for a handler's own
// decision.
func SnoozeUncounted(d time.Duration) error { return &snoozeError{d: max(d, 0)} }

// cancelError asks the Worker to cancel the job.
type cancelError struct{ err error }

func (e *cancelError) Error() string {
	if e.err == nil {
		return "queue: job cancelled by its handler"
	}
	return "queue: job cancelled by its handler: " + e.err.Error()
}
func (e *cancelError) Unwrap() error { return e.err }

// Cancel, returned by a handler, ends its job as cancelled: it is not
// retried and not dead-lettered, and its LastError records err (which may
// be nil).
func Cancel(err error) error { return &cancelError{err: err} }

// IsSnooze and IsCancel report whether err is a Snooze or a Cancel result.
func IsSnooze(err error) bool {
	var s *snoozeError
	return errors.As(err, &s)
}

// IsCancel reports whether err is a Cancel result.
func IsCancel(err error) bool {
	var c *cancelError
	return errors.As(err, &c)
}

// Per-type defaults: a job type may set its own options by methods on its
// value, read by NewJob (and so Dispatch) at dispatch; dispatch options
// override them. Backoff is read from the type's zero value by Handle and
// overrides the Worker's policy for that type.

// QueueNamer is a job type that chooses its queue.
type QueueNamer interface{ Queue() string }

// AttemptsLimiter is a job type that sets its total attempts.
type AttemptsLimiter interface{ MaxAttempts() int }

// TimeoutSetter is a job type that bounds each attempt.
type TimeoutSetter interface{ Timeout() time.Duration }

// Tagger is a job type that derives tags from its fields (Horizon tags a
// job by the models it carries): NewJob, and so Dispatch, puts them first
// in the job's Tags, before those of the Tags option, each once.
type Tagger interface{ Tags() []string }

// typeDefaults applies v's per-type options to j.
func typeDefaults(v any, j *Job) {
	if t, ok := v.(QueueNamer); ok {
		j.Queue = t.Queue()
	}
	if t, ok := v.(AttemptsLimiter); ok {
		j.MaxAttempts = t.MaxAttempts()
	}
	if t, ok := v.(TimeoutSetter); ok {
		j.Timeout = t.Timeout()
	}
	if t, ok := v.(Tagger); ok {
		j.Tags = slices.Clone(t.Tags())
	}
}

// uniqueTags drops the repeats of a tag, keeping the first: a type's tags
// and the Tags option's may name the same one.
func uniqueTags(tags []string) []string {
	if len(tags) < 2 {
		return slices.Clone(tags)
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// RetryUntil stops retrying the job after t: an attempt that fails after t
// dead-letters it, whatever attempts remain.
func RetryUntil(t time.Time) Option { return func(j *Job) { j.RetryUntil = t } }
