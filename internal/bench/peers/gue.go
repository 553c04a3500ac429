package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vgarvardt/gue/v5"
	"github.com/vgarvardt/gue/v5/adapter/pgxv5"

	"github.com/meridianjobs/meridian/internal/bench"
)

// gueSchema is gue's migrations/schema.sql at v5.8.0.
const gueSchema = `CREATE TABLE IF NOT EXISTS gue_jobs
(
  job_id      TEXT        NOT NULL PRIMARY KEY,
  priority    SMALLINT    NOT NULL,
  run_at      TIMESTAMPTZ NOT NULL,
  job_type    TEXT        NOT NULL,
  args        BYTEA       NOT NULL,
  error_count INTEGER     NOT NULL DEFAULT 0,
  last_error  TEXT,
  queue       TEXT        NOT NULL,
  created_at  TIMESTAMPTZ NOT NULL,
  updated_at  TIMESTAMPTZ NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_gue_jobs_selector ON gue_jobs (queue, run_at, priority);`

// gueJobType and gueQueue name the bench's jobs in gue.
const (
	gueJobType = "meridian_bench"
	gueQueue   = "meridian_bench"
)

// benchArgs is a bench job's payload, JSON as internal/bench's job is.
type benchArgs struct {
	T int64 `json:"t,omitempty"`
}

// zeroArgs is the JSON of a job with T zero.
var zeroArgs, _ = json.Marshal(benchArgs{})

// gueEngine is gue on a fresh schema as a bench.Engine.
type gueEngine struct {
	pool     *pgxpool.Pool
	client   *gue.Client
	settings peerSettings
}

// newGue makes a schema, creates gue's table in it, and returns the
// engine over a pgxpool of poolSize connections whose search_path is that
// schema, with a function that closes the pool and drops the schema.
func newGue(ctx context.Context, dsn string, poolSize int, s peerSettings) (bench.Engine, func(context.Context) error, error) {
	schema, dropSchema, err := newSchema(ctx, dsn, "gue_bench_")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("parsing the PostgreSQL DSN: %w", err), dropSchema(ctx))
	}
	cfg.MaxConns = int32(poolSize)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("connecting to PostgreSQL: %w", err), dropSchema(ctx))
	}
	drop := func(ctx context.Context) error {
		pool.Close()
		return dropSchema(ctx)
	}
	if _, err := pool.Exec(ctx, gueSchema); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("creating gue's table: %w", err), drop(ctx))
	}
	c, err := gue.NewClient(pgxv5.NewConnPool(pool))
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("making a gue client: %w", err), drop(ctx))
	}
	return &gueEngine{pool: pool, client: c, settings: s}, drop, nil
}

func (e *gueEngine) DispatchMany(ctx context.Context, n int) (int, error) {
	js := make([]*gue.Job, n)
	for i := range js {
		js[i] = &gue.Job{Type: gueJobType, Queue: gueQueue, Args: zeroArgs}
	}
	if err := e.client.EnqueueBatch(ctx, js); err != nil {
		return 0, err
	}
	return n, nil
}

func (e *gueEngine) Dispatch(ctx context.Context, t int64) error {
	args, err := json.Marshal(benchArgs{T: t})
	if err != nil {
		return err
	}
	return e.client.Enqueue(ctx, &gue.Job{Type: gueJobType, Queue: gueQueue, Args: args})
}

func (e *gueEngine) StartWorkers(o bench.Options, handle func(t int64)) (func() error, error) {
	wm := gue.WorkMap{gueJobType: func(_ context.Context, j *gue.Job) error {
		var a benchArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return err
		}
		handle(a.T)
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, o.Workers)
	for range o.Workers {
		// Graceful shutdown (gue's own option for it): a job running when
		// stop cancels finishes and its deletion commits, as the Engine's
		// stop promises.
		opts := []gue.WorkerPoolOption{gue.WithPoolQueue(gueQueue), gue.WithPoolPollInterval(e.settings.guePoll), gue.WithPoolGracefulShutdown(nil)}
		if e.settings.gueRunAt {
			opts = append(opts, gue.WithPoolPollStrategy(gue.RunAtPollStrategy))
		}
		wp, err := gue.NewWorkerPool(e.client, wm, e.settings.concurrency, opts...)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("making a gue worker pool: %w", err)
		}
		go func() { errs <- wp.Run(ctx) }()
	}
	return func() error {
		cancel()
		var err error
		timeout := time.After(time.Minute)
		for range o.Workers {
			select {
			case werr := <-errs:
				err = errors.Join(err, werr)
			case <-timeout:
				return errors.Join(err, errors.New("gue's workers did not stop within a minute"))
			}
		}
		return err
	}, nil
}
