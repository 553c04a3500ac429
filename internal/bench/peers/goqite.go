package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"maragu.dev/goqite"
	"maragu.dev/goqite/jobs"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", as sqlqueue/sqlite uses

	"github.com/meridianjobs/meridian/internal/bench"
)

// goqiteSchema is goqite's schema_sqlite.sql at v0.4.0.
const goqiteSchema = `create table goqite (
  id text primary key default ('m_' || lower(hex(randomblob(16)))),
  created text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  updated text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  queue text not null,
  body blob not null,
  timeout text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  received integer not null default 0,
  priority integer not null default 0
) strict;

create trigger goqite_updated_timestamp after update on goqite begin
  update goqite set updated = strftime('%Y-%m-%dT%H:%M:%fZ') where id = old.id;
end;

create index goqite_queue_priority_created_idx on goqite (queue, priority desc, created);`

// goqiteJob names the bench's job in goqite's runner.
const goqiteJob = "meridian_bench"

// goqiteEngine is goqite on a fresh SQLite file as a bench.Engine.
type goqiteEngine struct {
	db       *sql.DB
	q        *goqite.Queue
	settings peerSettings
}

// newGoqite makes a new SQLite file in dir with goqite's schema and
// returns the engine, with a function that closes and removes the file.
// The database is opened as goqite's README does: one connection, WAL,
// a busy timeout of 5 s, foreign keys on.
func newGoqite(ctx context.Context, dir string, s peerSettings, _ int) (bench.Engine, func(context.Context) error, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	path := filepath.Join(dir, "goqite_bench_"+hex.EncodeToString(b[:])+".db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)")
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	drop := func(context.Context) error {
		err := db.Close()
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			if rerr := os.Remove(f); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		return err
	}
	if _, err := db.ExecContext(ctx, goqiteSchema); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("creating goqite's schema: %w", err), drop(ctx))
	}
	q := goqite.New(goqite.NewOpts{DB: db, Name: "meridian_bench"})
	return &goqiteEngine{db: db, q: q, settings: s}, drop, nil
}

// DispatchMany queues n jobs in one transaction: goqite has no batch
// send, and a transaction per job would pay a commit each.
func (e *goqiteEngine) DispatchMany(ctx context.Context, n int) (int, error) {
	body, err := json.Marshal(benchArgs{})
	if err != nil {
		return 0, err
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	for range n {
		if _, err := jobs.CreateTx(ctx, tx, e.q, goqiteJob, goqite.Message{Body: body}); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return n, nil
}

func (e *goqiteEngine) Dispatch(ctx context.Context, t int64) error {
	body, err := json.Marshal(benchArgs{T: t})
	if err != nil {
		return err
	}
	_, err = jobs.Create(ctx, e.q, goqiteJob, goqite.Message{Body: body})
	return err
}

func (e *goqiteEngine) StartWorkers(o bench.Options, handle func(t int64)) (func() error, error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range o.Workers {
		r := jobs.NewRunner(jobs.NewRunnerOpts{Limit: e.settings.concurrency, PollInterval: e.settings.goqitePoll, Queue: e.q})
		r.Register(goqiteJob, func(_ context.Context, m []byte) error {
			var a benchArgs
			if err := json.Unmarshal(m, &a); err != nil {
				return err
			}
			handle(a.T)
			return nil
		})
		wg.Go(func() { r.Start(ctx) })
	}
	return func() error {
		cancel()
		wg.Wait()
		return nil
	}, nil
}
