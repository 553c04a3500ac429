package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", as sqlqueue/sqlite uses

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

// riverEngine is River on fresh storage as a bench.Engine: a new schema
// on PostgreSQL (riverpgxv5), a new file on SQLite (riversqlite).
type riverEngine[TTx any] struct {
	driver   func() riverdriver.Driver[TTx]
	schema   string // "" on SQLite
	settings riverSettings
	inserter *river.Client[TTx]
	zeros    []river.InsertManyParams
}

var quiet = slog.New(slog.DiscardHandler)

// newRiverPostgres makes a schema of a unique name on pool's database,
// migrates River into it, and returns the engine and a function that drops
// the schema.
func newRiverPostgres(ctx context.Context, pool *pgxpool.Pool, s riverSettings, maxBatch int) (bench.Engine, func(context.Context) error, error) {
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
	e, err := newRiver(ctx, func() riverdriver.Driver[pgx.Tx] { return riverpgxv5.New(pool) }, schema, s, maxBatch)
	if err != nil {
		return nil, nil, errors.Join(err, drop(ctx))
	}
	return e, drop, nil
}

// sqliteDSN is how the comparison opens a SQLite file for River with
// modernc.org/sqlite: WAL and synchronous=NORMAL, as sqlqueue/sqlite
// opens Meridian's, so a commit costs both the same, and a busy timeout.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(30000)"
}

// newRiverSQLite makes a new SQLite file in dir, migrates River into it,
// and returns the engine and a function that closes and removes the file.
// The database/sql pool has one connection, as riversqlite's package
// documentation advises ("set the maximum pool size to one connection").
func newRiverSQLite(ctx context.Context, dir string, s riverSettings, maxBatch int) (bench.Engine, func(context.Context) error, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	path := filepath.Join(dir, "river_bench_"+hex.EncodeToString(b[:])+".db")
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	drop := func(context.Context) error {
		err := db.Close()
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			if rerr := os.Remove(f); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		return err
	}
	e, err := newRiver(ctx, func() riverdriver.Driver[*sql.Tx] { return riversqlite.New(db) }, "", s, maxBatch)
	if err != nil {
		return nil, nil, errors.Join(err, drop(ctx))
	}
	return e, drop, nil
}

// newRiver migrates River into schema and returns an engine with its
// insert-only client.
func newRiver[TTx any](ctx context.Context, driver func() riverdriver.Driver[TTx], schema string, s riverSettings, maxBatch int) (*riverEngine[TTx], error) {
	m, err := rivermigrate.New(driver(), &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("migrating River: %w", err)
	}
	// An insert-only client (no Queues) for the producers.
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{handle: func(int64) {}})
	ins, err := river.NewClient(driver(), &river.Config{Schema: schema, Logger: quiet, Workers: workers})
	if err != nil {
		return nil, fmt.Errorf("making River's insert client: %w", err)
	}
	zeros := make([]river.InsertManyParams, maxBatch)
	for i := range zeros {
		zeros[i].Args = benchArgs{}
	}
	return &riverEngine[TTx]{driver: driver, schema: schema, settings: s, inserter: ins, zeros: zeros}, nil
}

func (e *riverEngine[TTx]) DispatchMany(ctx context.Context, n int) (int, error) {
	ps := e.zeros
	if n > len(ps) {
		ps = make([]river.InsertManyParams, n)
		for i := range ps {
			ps[i].Args = benchArgs{}
		}
	}
	return e.inserter.InsertManyFast(ctx, ps[:n])
}

func (e *riverEngine[TTx]) Dispatch(ctx context.Context, t int64) error {
	_, err := e.inserter.Insert(ctx, benchArgs{T: t}, nil)
	return err
}

func (e *riverEngine[TTx]) StartWorkers(o bench.Options, handle func(t int64)) (func() error, error) {
	var clients []*river.Client[TTx]
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
		c, err := river.NewClient(e.driver(), &river.Config{
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
