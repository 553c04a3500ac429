package queuetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Fake is a queue.Pusher (and driver.BatchPusher and
// driver.BatchDispatcher) that records every job pushed to it instead of
// storing it. Unique keys are honoured as a real
// queue would: a second push with a key an earlier recorded job of the
// same queue holds returns queue.ErrDuplicate and is not recorded. Safe for
// concurrent use. The zero value is ready to use.
type Fake struct {
	mu      sync.Mutex
	jobs    []queue.Job
	batches []driver.BatchRecord
	err     error
}

// NewFake returns an empty Fake.
func NewFake() *Fake { return &Fake{} }

// FailWith makes every later Push return err (nil restores success), to
// test how code handles a queue that is down.
func (f *Fake) FailWith(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Push records j, giving it an ID and CreatedAt when they are empty.
func (f *Fake) Push(ctx context.Context, j queue.Job) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pushLocked(j)
}

func (f *Fake) pushLocked(j queue.Job) error {
	if f.err != nil {
		return f.err
	}
	if j.ID == "" {
		j.ID = driver.NewID()
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = time.Now()
	}
	j.Queue = j.QueueName()
	if j.UniqueKey != "" {
		for _, k := range f.jobs {
			if k.Queue == j.Queue && k.UniqueKey == j.UniqueKey {
				return &driver.DuplicateError{UniqueKey: j.UniqueKey, ExistingID: k.ID}
			}
		}
	}
	j.Meta = maps.Clone(j.Meta)
	j.Tags = slices.Clone(j.Tags)
	j.Payload = slices.Clone(j.Payload)
	f.jobs = append(f.jobs, j)
	return nil
}

// PushMany records every job, as Push does one by one.
func (f *Fake) PushMany(ctx context.Context, jobs []queue.Job) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	stored := make([]bool, len(jobs))
	for i, j := range jobs {
		stored[i] = f.pushLocked(j) == nil
	}
	return stored, nil
}

// PushBatch records a batch (queue.DispatchBatch): its record, and its
// members as PushMany records jobs, each carrying queue.MetaBatch. Its
// callbacks are in the record (BatchRecord.Callback builds them).
func (f *Fake) PushBatch(ctx context.Context, rec driver.BatchRecord, jobs []queue.Job) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	n := 0
	for _, j := range jobs {
		if f.pushLocked(j) == nil {
			n++
		}
	}
	f.batches = append(f.batches, rec)
	return n, nil
}

// Batches returns the recorded batches in dispatch order.
func (f *Fake) Batches() []driver.BatchRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

// Jobs returns the recorded jobs in push order.
func (f *Fake) Jobs() []queue.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.jobs)
}

// Reset forgets the recorded jobs and batches.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs, f.batches = nil, nil
}

var _ driver.BatchPusher = (*Fake)(nil)

// Dispatched returns the values of type T recorded by f, in push order.
// Jobs named for T whose payload does not decode into T are left out.
func Dispatched[T any](f *Fake) []T {
	var out []T
	for _, j := range f.Jobs() {
		if v, ok := decode[T](j); ok {
			out = append(out, v)
		}
	}
	return out
}

func decode[T any](j queue.Job) (T, bool) {
	var v T
	if j.Name != queue.NameOf[T]() {
		return v, false
	}
	if err := json.Unmarshal(j.Payload, &v); err != nil {
		return v, false
	}
	return v, true
}

// Check is one condition on a dispatched job beyond its value.
type Check struct {
	desc string
	ok   func(queue.Job) bool
}

// String describes the condition, as failure messages show it.
func (c Check) String() string { return c.desc }

// OnQueue requires the job to be on the named queue.
func OnQueue(name string) Check {
	return Check{"on queue " + name, func(j queue.Job) bool { return j.QueueName() == name }}
}

// Delayed requires the job to be delayed by d (Delay): its
// AvailableAt is d after it was pushed, within a second.
func Delayed(d time.Duration) Check {
	return Check{fmt.Sprintf("delayed %s", d), func(j queue.Job) bool {
		if j.AvailableAt.IsZero() {
			return d == 0
		}
		got := j.AvailableAt.Sub(j.CreatedAt)
		return got <= d && got > d-time.Second
	}}
}

// At requires the job to be available at t (At).
func At(t time.Time) Check {
	return Check{"available at " + t.Format(time.RFC3339Nano), func(j queue.Job) bool { return j.AvailableAt.Equal(t) }}
}

// WithPriority requires the job's priority to be p.
func WithPriority(p int) Check {
	return Check{fmt.Sprintf("priority %d", p), func(j queue.Job) bool { return j.Priority == p }}
}

// WithUnique requires the job's unique key to be key.
func WithUnique(key string) Check {
	return Check{"unique key " + key, func(j queue.Job) bool { return j.UniqueKey == key }}
}

// WithMaxAttempts requires the job's MaxAttempts to be n.
func WithMaxAttempts(n int) Check {
	return Check{fmt.Sprintf("max attempts %d", n), func(j queue.Job) bool { return j.MaxAttempts == n }}
}

// WithTimeout requires the job's Timeout to be d.
func WithTimeout(d time.Duration) Check {
	return Check{fmt.Sprintf("timeout %s", d), func(j queue.Job) bool { return j.Timeout == d }}
}

// Tagged requires the job to carry tag.
func Tagged(tag string) Check {
	return Check{"tagged " + tag, func(j queue.Job) bool { return slices.Contains(j.Tags, tag) }}
}

// WithMeta requires the job's Meta to map key to value.
func WithMeta(key, value string) Check {
	return Check{fmt.Sprintf("meta %s=%s", key, value), func(j queue.Job) bool { v, ok := j.Meta[key]; return ok && v == value }}
}

// Matching requires fn(job) to hold; desc says what it checks.
func Matching(desc string, fn func(queue.Job) bool) Check { return Check{desc, fn} }

// count returns how many jobs are of type T, satisfy match (nil: any) and
// pass every check.
func count[T any](jobs []queue.Job, match func(T) bool, checks []Check) int {
	n := 0
	for _, j := range jobs {
		v, ok := decode[T](j)
		if !ok || (match != nil && !match(v)) {
			continue
		}
		if !slices.ContainsFunc(checks, func(c Check) bool { return !c.ok(j) }) {
			n++
		}
	}
	return n
}

// what describes the assertion: "SendEmail matching the predicate, on queue emails".
func what[T any](match func(T) bool, checks []Check) string {
	var b strings.Builder
	b.WriteString(queue.NameOf[T]())
	if match != nil {
		b.WriteString(" matching the predicate")
	}
	for _, c := range checks {
		b.WriteString(", ")
		b.WriteString(c.desc)
	}
	return b.String()
}

// describe lists the jobs, one a line, for failure messages.
func describe(jobs []queue.Job) string {
	if len(jobs) == 0 {
		return "nothing was dispatched"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "dispatched instead (%d):", len(jobs))
	for _, j := range jobs {
		fmt.Fprintf(&b, "\n\t%s on queue %s: %s", j.Name, j.QueueName(), j.Payload)
		if !j.AvailableAt.IsZero() {
			fmt.Fprintf(&b, " delayed %s", j.AvailableAt.Sub(j.CreatedAt).Round(time.Millisecond))
		}
		if j.Priority != 0 {
			fmt.Fprintf(&b, " priority %d", j.Priority)
		}
		if j.UniqueKey != "" {
			fmt.Fprintf(&b, " unique %s", j.UniqueKey)
		}
		if len(j.Tags) > 0 {
			fmt.Fprintf(&b, " tags %v", j.Tags)
		}
	}
	return b.String()
}

// AssertDispatched reports an error on t unless f recorded at least one
// job of type T that satisfies match (nil: any) and every check.
func AssertDispatched[T any](t testing.TB, f *Fake, match func(T) bool, checks ...Check) bool {
	t.Helper()
	jobs := f.Jobs()
	if count(jobs, match, checks) > 0 {
		return true
	}
	t.Errorf("queuetest: no %s was dispatched; %s", what(match, checks), describe(jobs))
	return false
}

// AssertNotDispatched reports an error on t if f recorded a job of type T
// that satisfies match (nil: any) and every check.
func AssertNotDispatched[T any](t testing.TB, f *Fake, match func(T) bool, checks ...Check) bool {
	t.Helper()
	jobs := f.Jobs()
	if n := count(jobs, match, checks); n > 0 {
		t.Errorf("queuetest: %d %s dispatched, want none; %s", n, what(match, checks), describe(jobs))
		return false
	}
	return true
}

// AssertDispatchedTimes reports an error on t unless f recorded exactly n
// jobs of type T that satisfy match (nil: any) and every check.
func AssertDispatchedTimes[T any](t testing.TB, f *Fake, n int, match func(T) bool, checks ...Check) bool {
	t.Helper()
	jobs := f.Jobs()
	if got := count(jobs, match, checks); got != n {
		t.Errorf("queuetest: %d %s dispatched, want %d; %s", got, what(match, checks), n, describe(jobs))
		return false
	}
	return true
}

// AssertNothingDispatched reports an error on t if f recorded any job.
func AssertNothingDispatched(t testing.TB, f *Fake) bool {
	t.Helper()
	if jobs := f.Jobs(); len(jobs) > 0 {
		t.Errorf("queuetest: want nothing dispatched; %s", describe(jobs))
		return false
	}
	return true
}
