package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meridianjobs/meridian/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "river bench:", err)
		os.Exit(1)
	}
}

// config is a comparison's settings.
type config struct {
	store    string // postgres or sqlite
	keepDone bool   // Meridian keeps done jobs, as River does
	dsn      string
	rounds   int
	pool     int
	modes    []bench.Mode
	opts     bench.Options
	river    riverSettings
}

// parse reads the command line.
func parse(args []string, errOut io.Writer) (config, error) {
	fs := flag.NewFlagSet("river bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	d := bench.DefaultOptions
	var (
		store       = fs.String("store", "postgres", "the store both systems run on: postgres (River on riverpgxv5) or sqlite (River on riversqlite, each system on a file of its own in a temporary directory)")
		keepDone    = fs.Bool("keep-done", false, "Meridian keeps acked jobs in the done state (sqlqueue.WithRetention), as River keeps completed ones: the same work on both sides")
		dsn         = fs.String("postgres-dsn", os.Getenv("MERIDIAN_POSTGRES_DSN"), "PostgreSQL DSN, a postgres:// URL (default $MERIDIAN_POSTGRES_DSN)")
		rounds      = fs.Int("rounds", 3, "interleaved rounds; each runs every mode for both systems")
		modes       = fs.String("modes", "burndown,continuous,latency", "comma-separated modes: burndown, continuous, dispatch, latency")
		jobs        = fs.Int("jobs", 200_000, "jobs queued before each burn-down")
		duration    = fs.Duration("duration", 60*time.Second, "length of the continuous mode")
		warmup      = fs.Duration("warmup", d.Warmup, "start of the continuous mode left uncounted")
		concurrency = fs.Int("concurrency", d.Concurrency, "handler goroutines: Meridian's Concurrency, River's MaxWorkers")
		poll        = fs.Duration("poll", d.Poll, "Meridian workers' idle poll interval")
		rate        = fs.Int("rate", d.Rate, "latency mode's dispatch rate in jobs/s")
		dispatchers = fs.Int("dispatchers", d.Dispatchers, "goroutines inserting one job at a time in the latency and dispatch modes")
		latencyDur  = fs.Duration("latency-duration", 60*time.Second, "length of the latency mode")
		pool        = fs.Int("pool", 16, "connections in each system's pgxpool (sqlqueue/postgres opens 16)")
		cooldown    = fs.Duration("river-fetch-cooldown", 2*time.Millisecond, "River's FetchCooldown (its own bench's setting)")
		fetchPoll   = fs.Duration("river-fetch-poll", 20*time.Millisecond, "River's FetchPollInterval (its own bench's setting)")
	)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case *store != "postgres" && *store != "sqlite":
		return config{}, fmt.Errorf("--store must be postgres or sqlite, not %q", *store)
	case *store == "postgres" && *dsn == "":
		return config{}, errors.New("no PostgreSQL: set --postgres-dsn or MERIDIAN_POSTGRES_DSN")
	}
	ms, err := bench.ParseModes(*modes)
	if err != nil {
		return config{}, err
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"rounds", *rounds}, {"jobs", *jobs}, {"concurrency", *concurrency}, {"rate", *rate}, {"dispatchers", *dispatchers}, {"pool", *pool}} {
		if v.n < 1 {
			return config{}, fmt.Errorf("--%s must be at least 1, not %d", v.name, v.n)
		}
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"duration", *duration}, {"poll", *poll}, {"latency-duration", *latencyDur}, {"river-fetch-cooldown", *cooldown}, {"river-fetch-poll", *fetchPoll}} {
		if v.d <= 0 {
			return config{}, fmt.Errorf("--%s must be positive, not %s", v.name, v.d)
		}
	}
	if *warmup < 0 || *warmup >= *duration {
		return config{}, fmt.Errorf("--warmup must be at least 0 and shorter than --duration (%s), not %s", *duration, *warmup)
	}
	o := d
	o.Modes = ms
	o.Jobs, o.Duration, o.Warmup = *jobs, *duration, *warmup
	o.Concurrency, o.Poll, o.Rate, o.LatencyDuration = *concurrency, *poll, *rate, *latencyDur
	o.Dispatchers = *dispatchers
	return config{store: *store, keepDone: *keepDone, dsn: *dsn, rounds: *rounds, pool: *pool, modes: ms, opts: o,
		river: riverSettings{fetchCooldown: *cooldown, fetchPoll: *fetchPoll}}, nil
}

func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	c, err := parse(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	c.opts.Progress = func(format string, args ...any) {
		fmt.Fprintf(errOut, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	fmt.Fprintf(out, "river bench: River v0.51.2 against Meridian on %s, %s %s/%s, %d CPUs, %s\n", c.store, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "%d round(s); jobs %d, continuous %s (warm-up %s), latency %d/s for %s from %d dispatchers, concurrency %d\n",
		c.rounds, c.opts.Jobs, c.opts.Duration, c.opts.Warmup, c.opts.Rate, c.opts.LatencyDuration, c.opts.Dispatchers, c.opts.Concurrency)
	fmt.Fprintf(out, "River: %s, FetchCooldown %s, FetchPollInterval %s, MaxWorkers %d, keeps completed jobs (its default)\n",
		c.riverStore(), c.river.fetchCooldown, c.river.fetchPoll, c.opts.Concurrency)
	fmt.Fprintf(out, "Meridian: %s, poll %s, %s\n\n", c.meridianStore(), c.opts.Poll, keepText(c.keepDone))
	res, err := compare(ctx, c)
	if werr := res.WriteTable(out); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// riverStore names River's driver and connections.
func (c config) riverStore() string {
	if c.store == "sqlite" {
		return "riversqlite on a file of its own, one connection (riversqlite's advice), WAL, synchronous=NORMAL"
	}
	return fmt.Sprintf("riverpgxv5, a pgxpool of %d", c.pool)
}

// meridianStore names Meridian's driver and connections.
func (c config) meridianStore() string {
	if c.store == "sqlite" {
		return "sqlqueue/sqlite on a file of its own (its one connection, WAL, synchronous=NORMAL)"
	}
	return fmt.Sprintf("sqlqueue/postgres, a pgxpool of %d", c.pool)
}

// keepText says what Meridian does with acked jobs.
func keepText(keep bool) string {
	if keep {
		return "keeps done jobs (--keep-done: the same work as River)"
	}
	return "deletes acked jobs (its default)"
}

// systems are the two sides of the comparison, in the order of odd rounds.
var systems = []string{"River", "Meridian"}

// compare runs c.rounds interleaved rounds and returns their figures, with
// those measured before an error.
func compare(ctx context.Context, c config) (*bench.Rounds, error) {
	res := bench.NewRounds(systems...)
	var (
		target   *bench.SQL
		newRiver func(ctx context.Context) (bench.Engine, func(context.Context) error, error)
		batch    = max(c.opts.ChunkSize, c.opts.BatchSize)
	)
	if c.store == "sqlite" {
		dir, err := os.MkdirTemp("", "river-bench-")
		if err != nil {
			return res, fmt.Errorf("making a directory for the SQLite files: %w", err)
		}
		defer os.RemoveAll(dir)
		target = bench.SQLite(filepath.Join(dir, "meridian.db"))
		newRiver = func(ctx context.Context) (bench.Engine, func(context.Context) error, error) {
			return newRiverSQLite(ctx, dir, c.river, batch)
		}
	} else {
		cfg, err := pgxpool.ParseConfig(c.dsn)
		if err != nil {
			return res, fmt.Errorf("parsing the PostgreSQL DSN: %w", err)
		}
		cfg.MaxConns = int32(c.pool)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("connecting to PostgreSQL: %w", err)
		}
		defer pool.Close()
		target = bench.Postgres(c.dsn)
		target.Pool = c.pool
		newRiver = func(ctx context.Context) (bench.Engine, func(context.Context) error, error) {
			return newRiverPostgres(ctx, pool, c.river, batch)
		}
	}
	target.KeepDone = c.keepDone
	o := c.opts
	o.ReadServerCPU = target.ServerCPU
	var err error
	for round := 1; round <= c.rounds; round++ {
		order := slices.Clone(systems)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, m := range c.modes {
			for _, s := range order {
				o.Progress("round %d, %s, %s", round, m, s)
				var figs []bench.Figure
				if s == "River" {
					figs, err = measure(ctx, newRiver, m, o)
				} else {
					figs, err = measure(ctx, target.NewQueueEngine, m, o)
				}
				res.Add(s, figs)
				if err != nil {
					return res, fmt.Errorf("round %d, %s, %s: %w", round, m, s, err)
				}
			}
		}
	}
	return res, nil
}

// measure measures mode m of a system on fresh storage that open makes,
// and drops it afterwards.
func measure(ctx context.Context, open func(context.Context) (bench.Engine, func(context.Context) error, error), m bench.Mode, o bench.Options) ([]bench.Figure, error) {
	e, drop, err := open(ctx)
	if err != nil {
		return nil, err
	}
	figs, err := bench.Measure(ctx, e, m, o)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return figs, errors.Join(err, drop(dctx))
}
