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

	"github.com/meridianjobs/meridian/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers bench:", err)
		os.Exit(1)
	}
}

// A peer is a job system compared with Meridian on the store it runs on.
type peer struct {
	name    string // the --peer value
	system  string // its column in the table, with its version
	store   string // postgres or sqlite
	version string
}

// peers are the systems --peer picks from.
var peers = []peer{
	{name: "gue", system: "gue", store: "postgres", version: "github.com/vgarvardt/gue/v5 v5.8.0"},
	{name: "neoq", system: "neoq", store: "postgres", version: "github.com/acaloiaro/neoq v0.72.2"},
	{name: "goqite", system: "goqite", store: "sqlite", version: "maragu.dev/goqite v0.4.0"},
}

// config is a comparison's settings.
type config struct {
	peer     peer
	keepDone bool // Meridian keeps done jobs
	dsn      string
	rounds   int
	pool     int
	modes    []bench.Mode
	opts     bench.Options
	settings peerSettings
}

// peerSettings are the peers' own knobs; their defaults are each
// library's own.
type peerSettings struct {
	concurrency      int           // the peer's handlers (--peer-concurrency)
	guePoll          time.Duration // gue's WorkerPool poll interval
	gueRunAt         bool          // gue's RunAtPollStrategy instead of its default PriorityPollStrategy
	neoqPendingCheck time.Duration // neoq's PendingJobCheckInterval
	goqitePoll       time.Duration // goqite's Runner PollInterval
}

// parse reads the command line.
func parse(args []string, errOut io.Writer) (config, error) {
	fs := flag.NewFlagSet("peers bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	d := bench.DefaultOptions
	var (
		name        = fs.String("peer", "", "the system compared with Meridian: gue or neoq (on PostgreSQL), goqite (on SQLite)")
		keepDone    = fs.Bool("keep-done", false, "Meridian keeps acked jobs in the done state (sqlqueue.WithRetention) instead of deleting them")
		dsn         = fs.String("postgres-dsn", os.Getenv("MERIDIAN_POSTGRES_DSN"), "PostgreSQL DSN, a postgres:// URL (default $MERIDIAN_POSTGRES_DSN)")
		rounds      = fs.Int("rounds", 3, "interleaved rounds; each runs every mode for both systems")
		modes       = fs.String("modes", "burndown,continuous,latency", "comma-separated modes: burndown, continuous, dispatch, latency")
		jobs        = fs.Int("jobs", 200_000, "jobs queued before each burn-down")
		duration    = fs.Duration("duration", 60*time.Second, "length of the continuous mode")
		warmup      = fs.Duration("warmup", d.Warmup, "start of the continuous mode left uncounted")
		concurrency = fs.Int("concurrency", d.Concurrency, "handler goroutines: Meridian's Concurrency, and the peer's unless --peer-concurrency")
		peerConc    = fs.Int("peer-concurrency", 0, "the peer's handlers when not --concurrency: gue's pool size (each worker holds a connection: at most --pool is useful), neoq's handler Concurrency, goqite's Runner Limit")
		poll        = fs.Duration("poll", d.Poll, "Meridian workers' idle poll interval")
		rate        = fs.Int("rate", d.Rate, "latency mode's dispatch rate in jobs/s")
		latencyDur  = fs.Duration("latency-duration", 60*time.Second, "length of the latency mode")
		pool        = fs.Int("pool", 16, "PostgreSQL: connections in each system's pgxpool (sqlqueue/postgres opens 16)")
		guePoll     = fs.Duration("gue-poll", 5*time.Second, "gue's WorkerPool poll interval (gue's default)")
		gueStrategy = fs.String("gue-strategy", "priority", "gue's poll strategy: priority (its default, PriorityPollStrategy: each poll sorts the queue's due jobs by priority, no index serves it) or runat (RunAtPollStrategy, served by its index)")
		neoqPending = fs.Duration("neoq-pending-check", 60*time.Second, "neoq's PendingJobCheckInterval, how often it looks for jobs no notification announced (neoq's default)")
		goqitePoll  = fs.Duration("goqite-poll", 100*time.Millisecond, "goqite's Runner PollInterval (goqite's default)")
	)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	i := slices.IndexFunc(peers, func(p peer) bool { return p.name == *name })
	if i < 0 {
		return config{}, fmt.Errorf("--peer must be gue, neoq or goqite, not %q", *name)
	}
	p := peers[i]
	if p.store == "postgres" && *dsn == "" {
		return config{}, fmt.Errorf("no PostgreSQL for %s: set --postgres-dsn or MERIDIAN_POSTGRES_DSN", p.name)
	}
	ms, err := bench.ParseModes(*modes)
	if err != nil {
		return config{}, err
	}
	if slices.Contains(ms, bench.ModeFailOnce) || slices.Contains(ms, bench.ModeFlood) {
		return config{}, errors.New("the failonce and flood modes are not compared with peers")
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"rounds", *rounds}, {"jobs", *jobs}, {"concurrency", *concurrency}, {"rate", *rate}, {"pool", *pool}} {
		if v.n < 1 {
			return config{}, fmt.Errorf("--%s must be at least 1, not %d", v.name, v.n)
		}
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"duration", *duration}, {"poll", *poll}, {"latency-duration", *latencyDur},
		{"gue-poll", *guePoll}, {"neoq-pending-check", *neoqPending}, {"goqite-poll", *goqitePoll}} {
		if v.d <= 0 {
			return config{}, fmt.Errorf("--%s must be positive, not %s", v.name, v.d)
		}
	}
	if *peerConc < 0 {
		return config{}, fmt.Errorf("--peer-concurrency must not be negative, not %d", *peerConc)
	}
	if *peerConc == 0 {
		*peerConc = *concurrency
	}
	if *gueStrategy != "priority" && *gueStrategy != "runat" {
		return config{}, fmt.Errorf("--gue-strategy must be priority or runat, not %q", *gueStrategy)
	}
	if *warmup < 0 || *warmup >= *duration {
		return config{}, fmt.Errorf("--warmup must be at least 0 and shorter than --duration (%s), not %s", *duration, *warmup)
	}
	o := d
	o.Modes = ms
	o.Jobs, o.Duration, o.Warmup = *jobs, *duration, *warmup
	o.Concurrency, o.Poll, o.Rate, o.LatencyDuration = *concurrency, *poll, *rate, *latencyDur
	return config{peer: p, keepDone: *keepDone, dsn: *dsn, rounds: *rounds, pool: *pool, modes: ms, opts: o,
		settings: peerSettings{concurrency: *peerConc, guePoll: *guePoll, gueRunAt: *gueStrategy == "runat", neoqPendingCheck: *neoqPending, goqitePoll: *goqitePoll}}, nil
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
	fmt.Fprintf(out, "peers bench: %s against Meridian on %s, %s %s/%s, %d CPUs, %s\n", c.peer.version, c.peer.store,
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "%d round(s); jobs %d, continuous %s (warm-up %s), latency %d/s for %s, concurrency %d (Meridian), %d (%s)\n",
		c.rounds, c.opts.Jobs, c.opts.Duration, c.opts.Warmup, c.opts.Rate, c.opts.LatencyDuration, c.opts.Concurrency, c.settings.concurrency, c.peer.system)
	fmt.Fprintf(out, "%s: %s\n", c.peer.system, c.peerText())
	fmt.Fprintf(out, "Meridian: %s, poll %s, %s\n\n", c.meridianText(), c.opts.Poll, keepText(c.keepDone))
	res, err := compare(ctx, c)
	if werr := res.WriteTable(out); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// peerText names the peer's settings for the header.
func (c config) peerText() string {
	s := c.settings
	switch c.peer.name {
	case "gue":
		strategy := "PriorityPollStrategy (its defaults)"
		if s.gueRunAt {
			strategy = "RunAtPollStrategy (--gue-strategy runat; its defaults otherwise)"
		}
		return fmt.Sprintf("adapter/pgxv5 over a pgxpool of %d (its %d workers hold a connection each while they poll and work), poll %s, %s, graceful shutdown, EnqueueBatch; deletes finished jobs (its only way)",
			c.pool, s.concurrency, s.guePoll, strategy)
	case "neoq":
		return fmt.Sprintf("postgres backend, pool_max_conns %d, a handler of Concurrency %d, a NOTIFY per job, PendingJobCheckInterval %s, synchronous_commit off (its defaults), one Enqueue per job, Shutdown to stop (it does not wait for running jobs), each job fingerprinted uniquely (neoq drops a payload already queued); keeps processed jobs (its only way)",
			c.pool, s.concurrency, s.neoqPendingCheck)
	default:
		return fmt.Sprintf("jobs.Runner, Limit %d, PollInterval %s, Extend 5s (its defaults), on a file of its own over modernc.org/sqlite with one connection, WAL, busy_timeout 5s, foreign keys (its README); queues in one transaction per DispatchMany (jobs.CreateTx); deletes finished jobs",
			s.concurrency, s.goqitePoll)
	}
}

// meridianText names Meridian's store and connections.
func (c config) meridianText() string {
	if c.peer.store == "sqlite" {
		return "sqlqueue/sqlite on a file of its own (its one connection, WAL, synchronous=NORMAL)"
	}
	return fmt.Sprintf("sqlqueue/postgres, a pgxpool of %d", c.pool)
}

// keepText says what Meridian does with acked jobs.
func keepText(keep bool) string {
	if keep {
		return "keeps done jobs (--keep-done)"
	}
	return "deletes acked jobs (its default)"
}

// opener makes fresh storage for one measurement of a system: the engine
// and a function that drops the storage.
type opener func(ctx context.Context) (bench.Engine, func(context.Context) error, error)

// compare runs c.rounds interleaved rounds and returns their figures, with
// those measured before an error.
func compare(ctx context.Context, c config) (*bench.Rounds, error) {
	systems := []string{c.peer.system, "Meridian"}
	res := bench.NewRounds(systems...)
	var (
		target  *bench.SQL
		newPeer opener
	)
	batch := max(c.opts.ChunkSize, c.opts.BatchSize)
	switch c.peer.name {
	case "goqite":
		dir, derr := os.MkdirTemp("", "peers-bench-")
		if derr != nil {
			return res, fmt.Errorf("making a directory for the SQLite files: %w", derr)
		}
		defer os.RemoveAll(dir)
		target = bench.SQLite(filepath.Join(dir, "meridian.db"))
		newPeer = func(ctx context.Context) (bench.Engine, func(context.Context) error, error) {
			return newGoqite(ctx, dir, c.settings, batch)
		}
	case "gue":
		target = bench.Postgres(c.dsn)
		newPeer = func(ctx context.Context) (bench.Engine, func(context.Context) error, error) {
			return newGue(ctx, c.dsn, c.pool, c.settings)
		}
	case "neoq":
		target = bench.Postgres(c.dsn)
		newPeer = func(ctx context.Context) (bench.Engine, func(context.Context) error, error) {
			return newNeoq(ctx, c.dsn, c.pool, c.settings)
		}
	}
	if c.peer.store == "postgres" {
		target.Pool = c.pool
	}
	target.KeepDone = c.keepDone
	o := c.opts
	o.ReadServerCPU = target.ServerCPU
	for round := 1; round <= c.rounds; round++ {
		order := slices.Clone(systems)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, m := range c.modes {
			for _, s := range order {
				o.Progress("round %d, %s, %s", round, m, s)
				open := opener(target.NewQueueEngine)
				if s != "Meridian" {
					open = newPeer
				}
				figs, merr := measure(ctx, open, m, o)
				res.Add(s, figs)
				if merr != nil {
					return res, fmt.Errorf("round %d, %s, %s: %w", round, m, s, merr)
				}
			}
		}
	}
	return res, nil
}

// measure measures mode m of a system on fresh storage that open makes,
// and drops it afterwards.
func measure(ctx context.Context, open opener, m bench.Mode, o bench.Options) ([]bench.Figure, error) {
	e, drop, err := open(ctx)
	if err != nil {
		return nil, err
	}
	figs, err := bench.Measure(ctx, e, m, o)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return figs, errors.Join(err, drop(dctx))
}
