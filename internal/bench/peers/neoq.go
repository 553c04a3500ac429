package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/acaloiaro/neoq"
	"github.com/acaloiaro/neoq/backends/postgres"
	"github.com/acaloiaro/neoq/handler"
	"github.com/acaloiaro/neoq/jobs"
	"github.com/acaloiaro/neoq/logging"

	"github.com/meridianjobs/meridian/internal/bench"
)

// neoqQueue is the queue of the bench's jobs in neoq.
const neoqQueue = "meridian_bench"

// neoqEngine is neoq's PostgreSQL backend on a fresh database as a
// bench.Engine.
type neoqEngine struct {
	dsn      string // naming a database of its own, with the pool's size
	settings peerSettings
	inserter neoq.Neoq
	// seq fingerprints every job uniquely: neoq refuses a job whose queue
	// and payload match one not yet processed, and the bench's jobs share
	// one payload.
	seq atomic.Int64
}

var quiet = slog.New(slog.DiscardHandler)

// newNeoq makes a database, and returns the engine whose backends connect
// to it (neoq migrates its tables there when its first backend starts),
// with a function that shuts the inserting backend down and drops the
// database.
func newNeoq(ctx context.Context, dsn string, poolSize int, s peerSettings) (bench.Engine, func(context.Context) error, error) {
	own, dropDB, err := newDatabase(ctx, dsn, "neoq_bench_")
	if err != nil {
		return nil, nil, err
	}
	e := &neoqEngine{
		dsn:      withParams(own, map[string]string{"pool_max_conns": strconv.Itoa(poolSize)}),
		settings: s,
	}
	e.inserter, err = e.backend(ctx)
	if err != nil {
		return nil, nil, errors.Join(err, dropDB(ctx))
	}
	drop := func(ctx context.Context) error {
		e.inserter.Shutdown(ctx)
		return dropDB(ctx)
	}
	return e, drop, nil
}

// backend starts a neoq PostgreSQL backend at its defaults but for the
// pending-job check interval the command line sets, with its logs
// discarded.
func (e *neoqEngine) backend(ctx context.Context) (neoq.Neoq, error) {
	nq, err := neoq.New(ctx, neoq.WithBackend(postgres.Backend), postgres.WithConnectionString(e.dsn),
		neoq.WithPendingJobCheckInterval(e.settings.neoqPendingCheck), neoq.WithLogLevel(logging.LogLevelError))
	if err != nil {
		return nil, fmt.Errorf("starting a neoq backend: %w", err)
	}
	nq.SetLogger(quiet)
	return nq, nil
}

func (e *neoqEngine) enqueue(ctx context.Context, t int64) error {
	_, err := e.inserter.Enqueue(ctx, &jobs.Job{
		Queue:       neoqQueue,
		Payload:     map[string]any{"t": t},
		Fingerprint: strconv.FormatInt(e.seq.Add(1), 10),
	})
	return err
}

// DispatchMany enqueues n jobs one by one: neoq has no batch enqueue.
func (e *neoqEngine) DispatchMany(ctx context.Context, n int) (int, error) {
	for i := range n {
		if err := e.enqueue(ctx, 0); err != nil {
			return i, err
		}
	}
	return n, nil
}

func (e *neoqEngine) Dispatch(ctx context.Context, t int64) error { return e.enqueue(ctx, t) }

func (e *neoqEngine) StartWorkers(o bench.Options, handle func(t int64)) (func() error, error) {
	var backends []neoq.Neoq
	stopAll := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, nq := range backends {
			nq.Shutdown(ctx)
		}
		return nil
	}
	for range o.Workers {
		nq, err := e.backend(context.Background())
		if err != nil {
			return nil, errors.Join(err, stopAll())
		}
		backends = append(backends, nq)
		h := handler.New(neoqQueue, func(ctx context.Context) error {
			j, err := jobs.FromContext(ctx)
			if err != nil {
				return err
			}
			// neoq decodes the payload's JSON into a map; numbers arrive
			// as float64.
			t, _ := j.Payload["t"].(float64)
			handle(int64(t))
			return nil
		}, handler.Concurrency(e.settings.concurrency))
		if err := nq.Start(context.Background(), h); err != nil {
			return nil, errors.Join(fmt.Errorf("starting neoq's handler: %w", err), stopAll())
		}
	}
	return stopAll, nil
}
