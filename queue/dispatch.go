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
// reports a duplicate).
func Unique(key string) Option { return func(j *Job) { j.UniqueKey = key } }

// UniqueFor is Unique(key) with the key held for d after the push, even
// once the job has finished (see Job.UniqueFor).
func UniqueFor(key string, d time.Duration) Option {
	return func(j *Job) { j.UniqueKey, j.UniqueFor = key, d }
}

// UniqueByPayload makes the job unique among active jobs of its queue by
// its name and payload: the key is derived from both (a SHA-256), so two
// dispatches of equal values are one job. Apply it after options that
// change the payload.
func UniqueByPayload() Option {
	return func(j *Job) {
		h := sha256.New()
		h.Write([]byte(j.Name))
		h.Write([]byte{0})
		h.Write(j.Payload)
		j.UniqueKey = "payload:" + hex.EncodeToString(h.Sum(nil))
	}
}

// Replace is Unique(key) where a second push replaces the waiting job that
// holds key, taking its place with the new payload and run time (debounce;
// see Job.UniqueReplace).
func Replace(key string) Option {
	return func(j *Job) { j.UniqueKey, j.UniqueReplace = key, true }
}

// MaxAttempts caps this job's total attempts, overriding the worker's
// MaxRetry.
func MaxAttempts(n int) Option { return func(j *Job) { j.MaxAttempts = n } }

// Timeout bounds each attempt of this job, overriding the worker's Timeout.
func Timeout(d time.Duration) Option { return func(j *Job) { j.Timeout = d } }

// Tags adds tags to the job.
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
// (QueueNamer, AttemptsLimiter, TimeoutSetter) apply first; opts override
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
	if j.Queue == "" {
		j.Queue = DefaultQueue
	}
	if j.Meta != nil {
		j.Meta = maps.Clone(j.Meta)
	}
	j.Tags = slices.Clone(j.Tags)
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

// DispatchAfter is Dispatch with the job available d from now. Drivers do not
// deliver it earlier.
func DispatchAfter[T any](ctx context.Context, p Pusher, v T, d time.Duration, opts ...Option) error {
	return Dispatch(ctx, p, v, append(opts, Delay(d))...)
}

// DispatchAt is Dispatch with the job available at t.
func DispatchAt[T any](ctx context.Context, p Pusher, v T, t time.Time, opts ...Option) error {
	return Dispatch(ctx, p, v, append(opts, At(t))...)
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
