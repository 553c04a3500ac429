package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/meridianjobs/meridian/internal/bench"
)

// taskType is asynq's name of the bench job.
const taskType = "meridian_bench"

// benchArgs is the bench job: T as in internal/bench's job (zero, or the
// Dispatch time in Unix nanoseconds), JSON-encoded the same way.
type benchArgs struct {
	T int64 `json:"t,omitempty"`
}

// asynqEngine is asynq on one Redis database as a bench.Engine.
type asynqEngine struct {
	opt    asynq.RedisClientOpt
	client *asynq.Client
	fanout int
	check  time.Duration // Config.TaskCheckInterval; 0 for asynq's default
	zero   []byte        // the payload of a T-zero job
}

// quietLogger drops asynq's log lines.
type quietLogger struct{}

func (quietLogger) Debug(...any) {}
func (quietLogger) Info(...any)  {}
func (quietLogger) Warn(...any)  {}
func (quietLogger) Error(...any) {}
func (quietLogger) Fatal(...any) {}

func newAsynq(opt asynq.RedisClientOpt, fanout int, check time.Duration) (*asynqEngine, error) {
	zero, err := json.Marshal(benchArgs{})
	if err != nil {
		return nil, err
	}
	return &asynqEngine{opt: opt, client: asynq.NewClient(opt), fanout: fanout, check: check, zero: zero}, nil
}

func (e *asynqEngine) close() error { return e.client.Close() }

// DispatchMany enqueues n tasks, one Enqueue each (asynq has no batch
// enqueue), from e.fanout goroutines.
func (e *asynqEngine) DispatchMany(ctx context.Context, n int) (int, error) {
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, e.fanout)
	for g := range e.fanout {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := e.client.EnqueueContext(ctx, asynq.NewTask(taskType, e.zero)); err != nil {
					errs[g] = fmt.Errorf("enqueueing an asynq task: %w", err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load()), errors.Join(errs...)
}

func (e *asynqEngine) Dispatch(ctx context.Context, t int64) error {
	p, err := json.Marshal(benchArgs{T: t})
	if err != nil {
		return err
	}
	_, err = e.client.EnqueueContext(ctx, asynq.NewTask(taskType, p))
	return err
}

// StartWorkers starts o.Workers asynq servers of o.Concurrency workers
// each on the default queue.
func (e *asynqEngine) StartWorkers(o bench.Options, handle func(t int64)) (func() error, error) {
	var servers []*asynq.Server
	stopAll := func() error {
		for _, s := range servers {
			s.Shutdown() // waits for the running tasks, whose completion it records first
		}
		return nil
	}
	h := asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		var a benchArgs
		if err := json.Unmarshal(t.Payload(), &a); err != nil {
			return err
		}
		handle(a.T)
		return nil
	})
	for range o.Workers {
		s := asynq.NewServer(e.opt, asynq.Config{
			Concurrency: o.Concurrency,
			Queues:      map[string]int{"default": 1},
			Logger:      quietLogger{},
			LogLevel:    asynq.FatalLevel,

			TaskCheckInterval: e.check,
		})
		if err := s.Start(h); err != nil {
			return nil, errors.Join(fmt.Errorf("starting an asynq server: %w", err), stopAll())
		}
		servers = append(servers, s)
	}
	return stopAll, nil
}
