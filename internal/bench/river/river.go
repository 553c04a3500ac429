package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/meridianjobs/meridian/internal/bench"
)

// benchArgs is River's bench job: T as in internal/bench's job (zero, or
// the Dispatch time in Unix nanoseconds), JSON-encoded the same way.
type benchArgs struct {
	T int64 `json:"t,omitempty"`
}

func (benchArgs) Kind() string { return "meridian_bench" }

// benchWorker is River's handler: River has decoded the payload already,
// as Meridian's typed Handle has.
type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	handle func(t int64)
}

func (w *benchWorker) Work(_ context.Context, j *river.Job[benchArgs]) error {
	w.handle(j.Args.T)
	return nil
}

// riverSettings are the River client's knobs the comparison sets.
type riverSettings struct {
	fetchCooldown, fetchPoll time.Duration
}

// riverEngine is River on one fresh schema as a bench.Engine.
type riverEngine struct {
	pool     *pgxpool.Pool
	schema   string
	settings riverSettings
	inserter *river.Client[pgx.Tx]
	zeros    []river.InsertManyParams
}

var quiet = slog.New(slog.DiscardHandler)

// newRiver makes a schema of a unique name on pool's database, migrates
// River into it, and returns the engine and a function that drops the
// schema.
func newRiver(ctx context.Context, pool *pgxpool.Pool, s riverSettings, maxBatch int) (*riverEngine, func(context.Context) error, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "river_bench_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, nil, fmt.Errorf("creating schema %s: %w", schema, err)
	}
	drop := func(ctx context.Context) error {
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("dropping schema %s: %w", schema, err)
		}
		return nil
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("migrating River into %s: %w", schema, err), drop(ctx))
	}
	// An insert-only client (no Queues) for the producers.
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{handle: func(int64) {}})
	ins, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: quiet, Workers: workers})
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("making River's insert client: %w", err), drop(ctx))
	}
	zeros := make([]river.InsertManyParams, maxBatch)
	for i := range zeros {
		zeros[i].Args = benchArgs{}
	}
	return &riverEngine{pool: pool, schema: schema, settings: s, inserter: ins, zeros: zeros}, drop, nil
}

func (e *riverEngine) DispatchMany(ctx context.Context, n int) (int, error) {
	ps := e.zeros
	if n > len(ps) {
		ps = make([]river.InsertManyParams, n)
		for i := range ps {
			ps[i].Args = benchArgs{}
		}
	}
	return e.inserter.InsertManyFast(ctx, ps[:n])
}

func (e *riverEngine) Dispatch(ctx context.Context, t int64) error {
	_, err := e.inserter.Insert(ctx, benchArgs{T: t}, nil)
	return err
}

func (e *riverEngine) StartWorkers(o bench.Options, handle func(t int64)) (func() error, error) {
	var clients []*river.Client[pgx.Tx]
	stopAll := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		for _, c := range clients {
			err = errors.Join(err, c.Stop(ctx))
		}
		return err
	}
	for range o.Workers {
		workers := river.NewWorkers()
		river.AddWorker(workers, &benchWorker{handle: handle})
		c, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{
			Schema:            e.schema,
			Logger:            quiet,
			FetchCooldown:     e.settings.fetchCooldown,
			FetchPollInterval: e.settings.fetchPoll,
			Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.Concurrency}},
			Workers:           workers,
		})
		if err == nil {
			err = c.Start(context.Background())
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("starting a River client: %w", err), stopAll())
		}
		clients = append(clients, c)
	}
	return stopAll, nil
}
