package queue

import (
	"context"
	"encoding/json"
	"fmt"
)

// Handler runs one attempt of a job. It returns nil when the job is done; an
// error makes the Worker retry the job after its backoff, or dead-letter it
// when the error is Permanent or the job's attempts are used up.
//
// The context is the job's own: it is cancelled at the job's timeout, when
// the worker's shutdown grace runs out, or when the job's lease is lost. It
// is not cancelled by the context passed to Run.
type Handler func(ctx context.Context, j Job) error

// Middleware wraps a Handler, for logging, tracing, metrics or recovery.
// Middleware registered with Worker.Use runs outermost first, around the
// payload decoding and the typed handler.
type Middleware func(Handler) Handler

type jobKey struct{}

// JobFromContext returns the job that a handler's context belongs to.
func JobFromContext(ctx context.Context) (Job, bool) {
	j, ok := ctx.Value(jobKey{}).(*Job)
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// Handle registers fn as the handler for jobs named for T (see NameOf). The
// worker decodes each job's JSON payload into a T and calls fn. A payload
// that does not decode is dead-lettered at once with an error matching
// ErrDecode. Registering a name twice panics, as http.ServeMux does. When T
// sets its own backoff (BackoffSetter, on the zero value), it overrides the
// worker's policy for these jobs.
func Handle[T any](w *Worker, fn func(ctx context.Context, v T) error) {
	name := NameOf[T]()
	var zero T
	if b, ok := any(zero).(BackoffSetter); ok {
		w.typeBackoff[name] = b
	}
	w.Register(name, func(ctx context.Context, j Job) error {
		var v T
		if err := json.Unmarshal(j.Payload, &v); err != nil {
			return Permanent(fmt.Errorf("%w: job %s (%s) into %T: %v", ErrDecode, j.ID, name, v, err))
		}
		return fn(ctx, v)
	})
}
