package driver

import "context"

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
