package bench

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/balance"
)

// Engine is a job system as the modes drive it: a way to queue bench jobs
// and a way to work them. Meridian over a queue.Queue is one (QueueEngine);
// the River comparison (the nested module internal/bench/river) is
// another, measured by the same mode code, so the two differ only in the
// system under test.
//
// A bench job carries one number, T: zero, or in the latency mode the
// time of its tick (Unix nanoseconds), when it became due for dispatch.
// Its payload is JSON, decoded by the system before the handler sees it,
// as a user's job is.
type Engine interface {
	// DispatchMany queues n jobs with T zero in one call and returns how
	// many it queued. It may be called from several goroutines at once.
	DispatchMany(ctx context.Context, n int) (int, error)
	// Dispatch queues one job carrying t. It may be called from several
	// goroutines at once.
	Dispatch(ctx context.Context, t int64) error
	// StartWorkers starts o.Workers workers, each running o.Concurrency
	// handlers with idle poll o.Poll, that call handle with each job's T
	// and then succeed (in the fail-once mode: that call handle in every
	// attempt and fail a job's first, retried at once). stop stops them and returns once every handled
	// job's completion is stored.
	StartWorkers(o Options, handle func(t int64)) (stop func() error, err error)
}

// QueueEngine is Meridian over q as an Engine: DispatchMany and Dispatch
// of the bench job type, and queue.Worker values with a typed handler.
func QueueEngine(q queue.Queue) Engine { return queueEngine{q: q} }

// QueuesEngine is QueueEngine over the queues names of q (none: the
// default queue): each DispatchMany and Dispatch goes to the next queue in
// turn, and worker i works every queue in strict order starting at
// queue i (see Options.Queues).
func QueuesEngine(q queue.Queue, names ...string) Engine {
	if len(names) == 0 {
		return queueEngine{q: q}
	}
	return queueEngine{q: q, names: slices.Clone(names), next: new(atomic.Uint64)}
}

type queueEngine struct {
	q     queue.Queue
	names []string       // the queues; none: the default queue
	next  *atomic.Uint64 // the calls made, picking each call's queue
}

// opts returns the options of the next dispatch: the next queue in turn.
func (e queueEngine) opts() []queue.Option {
	if len(e.names) == 0 {
		return nil
	}
	return []queue.Option{queue.OnQueue(e.names[(e.next.Add(1)-1)%uint64(len(e.names))])}
}

// rotated returns the queues in strict order starting at the i-th
// (modulo their number), or nil for the default queue alone.
func rotated(names []string, i int) []string {
	if len(names) == 0 {
		return nil
	}
	k := i % len(names)
	return slices.Concat(names[k:], names[:k])
}

// errFirstAttempt is the fail-once mode's failure of a first attempt.
var errFirstAttempt = errors.New("bench: the first attempt fails")

// zeros is the batch every DispatchMany of T-zero jobs sends: shared and
// never written, so concurrent callers need no copy of their own.
var zeros = make([]job, maxBatch)

// maxBatch is the largest batch DispatchMany sends without allocating.
const maxBatch = 10_000

func (e queueEngine) DispatchMany(ctx context.Context, n int) (int, error) {
	b := zeros[:min(n, maxBatch)]
	if n > maxBatch {
		b = make([]job, n)
	}
	return queue.DispatchMany(ctx, e.q, b, e.opts()...)
}

func (e queueEngine) Dispatch(ctx context.Context, t int64) error {
	return queue.Dispatch(ctx, e.q, job{T: t}, e.opts()...)
}

func (e queueEngine) StartWorkers(o Options, handle func(t int64)) (func() error, error) {
	ws := make([]*queue.Worker, 0, o.Workers)
	errs := make(chan error, o.Workers)
	for i := range o.Workers {
		w := queue.NewWorker(e.q).Slog(quiet).Concurrency(o.Concurrency).Poll(o.Poll).ShutdownTimeout(10 * time.Second).
			Queues(rotated(e.names, i)...)
		if o.Prefetch != 0 {
			w.Prefetch(max(o.Prefetch, 0))
		}
		if o.failFirst {
			w.Backoff(0)
		}
		if o.Balance == balance.Simple || o.Balance == balance.Auto {
			w.Balance(balance.Options{Strategy: o.Balance, Max: o.Concurrency})
		}
		queue.Handle(w, func(ctx context.Context, v job) error {
			handle(v.T)
			if o.failFirst {
				if j, _ := queue.JobFromContext(ctx); j.Attempts <= 1 {
					return errFirstAttempt
				}
			}
			return nil
		})
		ws = append(ws, w)
		go func() { errs <- w.Run(context.Background()) }()
	}
	return func() error {
		for _, w := range ws {
			w.Stop()
		}
		var err error
		for range ws {
			err = errors.Join(err, <-errs)
		}
		return err
	}, nil
}

// Measure runs mode m on e, which should be empty, and returns its figures.
// The dispatch mode measures Dispatch and DispatchMany one after the other
// on e. Run calls it on a fresh queue per mode; the River comparison on a
// fresh schema per mode.
func Measure(ctx context.Context, e Engine, m Mode, opts Options) ([]Figure, error) {
	o := opts.withDefaults()
	switch m {
	case ModeBurnDown:
		return burnDown(ctx, e, o)
	case ModeContinuous:
		return continuous(ctx, e, o)
	case ModeDispatch:
		one, err := dispatchOne(ctx, e, o)
		if err != nil {
			return one, err
		}
		many, err := dispatchMany(ctx, e, o)
		return append(one, many...), err
	case ModeLatency:
		return latency(ctx, e, o)
	case ModeFlood:
		qe, ok := e.(queueEngine)
		if !ok {
			return nil, errors.New("bench: the flood mode runs on Meridian's queues only")
		}
		return flood(ctx, qe.q, o)
	}
	return nil, errors.New("bench: unknown mode " + string(m))
}
