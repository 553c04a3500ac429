package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/internal/bench"
	"github.com/meridianjobs/meridian/queue/balance"
)

func init() {
	commands["bench"] = command{
		summary: "measure jobs/s and latency per driver against an INSERT baseline",
		run:     runBench,
	}
}

// benchDrivers are the drivers `meridian bench` knows, in run order.
var benchDrivers = []string{"memory", "sqlite", "postgres", "mysql", "redis"}

// benchServerFlags name where each server driver's address comes from.
var benchServerFlags = map[string]string{
	"postgres": "--postgres-dsn or MERIDIAN_POSTGRES_DSN",
	"mysql":    "--mysql-dsn or MERIDIAN_MYSQL_DSN",
	"redis":    "--redis-url or MERIDIAN_REDIS_ADDR",
}

// defaultRedisURL is redis://$MERIDIAN_REDIS_ADDR/0, or empty when that
// variable is unset.
func defaultRedisURL() string {
	if a := os.Getenv("MERIDIAN_REDIS_ADDR"); a != "" {
		return "redis://" + a + "/0"
	}
	return ""
}

// queuesText describes Options.Queues for the run's header: nothing for
// the default queue alone.
func queuesText(n int) string {
	if n < 2 {
		return ""
	}
	return fmt.Sprintf("%d queues, ", n)
}

func runBench(ctx context.Context, args []string) error {
	return benchMain(ctx, args, os.Stdout, os.Stderr)
}

// benchMain is runBench with its streams: figures to out, progress and
// notes to errOut.
func benchMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("meridian bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var (
		drivers     = fs.String("driver", "", "comma-separated drivers to measure: memory, sqlite, postgres, mysql, redis (default: memory, sqlite and each server whose DSN is set)")
		pgDSN       = fs.String("postgres-dsn", os.Getenv("MERIDIAN_POSTGRES_DSN"), "PostgreSQL DSN (default $MERIDIAN_POSTGRES_DSN)")
		myDSN       = fs.String("mysql-dsn", os.Getenv("MERIDIAN_MYSQL_DSN"), "MySQL/MariaDB DSN, user@tcp(host:port)/db (default $MERIDIAN_MYSQL_DSN)")
		redisURL    = fs.String("redis-url", defaultRedisURL(), "Redis URL, redis://host:port/db, or a Redis Cluster's, redis://host:7000?addr=host:7001&addr=host:7002 (or ?cluster=true); the queues use keys under prefixes of their own, deleted afterwards (default redis://$MERIDIAN_REDIS_ADDR/0)")
		queues      = fs.Int("queues", 0, "queues to spread the jobs over, each dispatch to the next in turn, worker i working them all in strict order from queue i (default 1: the default queue); on a Redis Cluster they are named to fall on different masters, and one queue is served by one master")
		sqlitePath  = fs.String("sqlite", "", "SQLite database file (default: a new file in a temporary directory, removed afterwards)")
		quick       = fs.Bool("quick", false, "smoke run: seconds per driver, figures too small to quote")
		modes       = fs.String("modes", "all", "comma-separated modes: burndown, failonce (burn-down where every first attempt fails), continuous, dispatch, latency, flood (a flooded queue beside a trickle, under strict order, auto, auto moving half the budget per cooldown, and weights 6:1), or all (all but failonce and flood)")
		jobs        = fs.Int("jobs", 0, "jobs queued before the burn-down (default 1000000; --quick 20000)")
		duration    = fs.Duration("duration", 0, "length of the continuous mode and of each dispatch figure (default 8s)")
		warmup      = fs.Duration("warmup", 0, "start of the continuous mode left uncounted (default 2s)")
		workers     = fs.Int("workers", 0, "Worker values running at once (default 1)")
		concurrency = fs.Int("concurrency", 0, "handler goroutines per worker (default 1000); a Reserve asks for the free handlers' jobs plus room in the prefetch buffer, so it can carry more than this")
		jobTime     = fs.Duration("job-time", 0, "how long each handler of the burn-down and continuous modes runs (it sleeps; default 0: a no-op handler)")
		balanceBy   = fs.String("balance", "strict", "how each worker of the burn-down, continuous and latency modes shares its handlers among its queues: strict (their order), simple or auto (a budget of --concurrency, balance.Simple or balance.Auto)")
		prefetch    = fs.Int("prefetch", -1, "jobs each worker reserves ahead of its free handlers, at most (default: the Worker's, 1000; 0 turns prefetch off)")
		poll        = fs.Duration("poll", 0, "workers' idle poll interval (default 50ms)")
		producers   = fs.Int("producers", 0, "goroutines dispatching with DispatchMany (default 2)")
		batch       = fs.Int("batch", 0, "jobs per DispatchMany of a continuous producer (default 1000)")
		chunk       = fs.Int("chunk", 0, "jobs per DispatchMany of the burn-down fill and the dispatch figure (default 1000)")
		backlog     = fs.Int("backlog", 0, "continuous producers pause above this many unhandled jobs (default 20000)")
		dispatchers = fs.Int("dispatchers", 0, "goroutines calling Dispatch in the dispatch and latency modes (default 8)")
		rate        = fs.Int("rate", 0, "latency mode's dispatch rate in jobs/s (default 1000)")
		latencyDur  = fs.Duration("latency-duration", 0, "length of the latency mode (default 5s)")
		baseConns   = fs.Int("baseline-conns", 0, "connections inserting in the baseline (default 8)")
		baseDur     = fs.Duration("baseline-duration", 0, "length of the baseline (default 5s)")
		pool        = fs.Int("pool", 0, "connections in each PostgreSQL/MySQL queue's pool instead of the driver package's default (PostgreSQL: pool_max_conns; MySQL: an *sql.DB keeping them all idle)")
		pushLanes   = fs.Int("push-lanes", -1, "SQL stores and Redis: single Dispatches of a queue run on their own at once before the others wait and go together as one insertion or script call (WithPushLanes; 0: each alone; -1: the driver's default)")
		keepDone    = fs.Bool("keep-done", false, "SQL stores: keep acked jobs in the done state (sqlqueue.WithRetention) instead of deleting them, as River does by default")
		searchIndex = fs.Bool("search-index", false, "SQL stores: create the payload search index (meridian search enable) of each mode's tables first: what it costs on every write")
		kept        = fs.Int("kept", 0, "SQL stores: before each mode, fill its fresh jobs table with this many kept rows of finished work, production-shaped (85% done, 10% scheduled 1-10 hours ahead, 5% dead), in bulk INSERT ... SELECT statements: the claim's and ack's cost as the table grows")
		analyzeKept = fs.Bool("analyze-kept", false, "with --kept: ANALYZE the jobs table once the kept rows are written, before the mode queues its jobs (stale statistics; with --analyze too, fresh ones after the fill; neither: none)")
		analyze     = fs.Bool("analyze", false, "ANALYZE the jobs table after the burn-down's fill, as autovacuum would on a production server")
		showCalls   = fs.Bool("calls", false, "also print, per mode, the driver calls made and the jobs each carried")
		cpuProfile  = fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
		memProfile  = fs.String("memprofile", "", "write an allocation profile of the whole run to this file")
		jsonOut     = fs.String("json", "", "also write the results as JSON to this file, for a later --compare")
		compareOld  = fs.String("compare", "", "compare this run with the JSON results in this file and print per-figure deltas")
		failOver    = fs.Float64("fail-over", 0, "with --compare, exit non-zero when a figure is worse by more than this many percent (0: report only; figures worse than 5% are always marked)")
	)
	fs.Usage = func() {
		fmt.Fprintln(errOut, `usage: meridian bench [flags]

Measures each driver end to end through the public API: burn-down (jobs
queued first, then worked), continuous (dispatching while working),
dispatch-only (Dispatch and DispatchMany) and latency from dispatch to
handler start at a steady rate. Beside them it measures single-row INSERT
transactions per second on the same database (the baseline) and prints
every throughput as a ratio to it. Each mode uses fresh tables named
meridian_bench_* that are dropped afterwards.

flags:`)
		fs.PrintDefaults()
	}
	rest, err := parseArgs(fs, args)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected arguments %q", rest)
	}

	o := bench.DefaultOptions
	if *quick {
		o = bench.QuickOptions
	}
	ms, err := bench.ParseModes(*modes)
	if err != nil {
		return usageError{err}
	}
	o.Modes = ms
	o.Analyze = *analyze
	if *kept < 0 {
		return usagef("--kept must be at least 0, not %d", *kept)
	}
	o.Kept, o.AnalyzeKept = *kept, *analyzeKept
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, v := range []struct {
		name string
		val  int
		dst  *int
	}{
		{"jobs", *jobs, &o.Jobs}, {"workers", *workers, &o.Workers}, {"concurrency", *concurrency, &o.Concurrency},
		{"producers", *producers, &o.Producers}, {"batch", *batch, &o.BatchSize}, {"chunk", *chunk, &o.ChunkSize},
		{"backlog", *backlog, &o.MaxBacklog}, {"dispatchers", *dispatchers, &o.Dispatchers}, {"rate", *rate, &o.Rate},
		{"baseline-conns", *baseConns, &o.BaselineConns}, {"queues", *queues, &o.Queues},
	} {
		if set[v.name] {
			if v.val < 1 {
				return usagef("--%s must be at least 1, not %d", v.name, v.val)
			}
			*v.dst = v.val
		}
	}
	for _, v := range []struct {
		name string
		val  time.Duration
		dst  *time.Duration
	}{
		{"duration", *duration, &o.Duration}, {"poll", *poll, &o.Poll},
		{"latency-duration", *latencyDur, &o.LatencyDuration}, {"baseline-duration", *baseDur, &o.BaselineDuration},
	} {
		if set[v.name] {
			if v.val <= 0 {
				return usagef("--%s must be positive, not %s", v.name, v.val)
			}
			*v.dst = v.val
		}
	}
	if set["prefetch"] {
		switch {
		case *prefetch < 0:
			return usagef("--prefetch must be at least 0, not %d", *prefetch)
		case *prefetch == 0:
			o.Prefetch = -1
		default:
			o.Prefetch = *prefetch
		}
	}
	if *jobTime < 0 {
		return usagef("--job-time must be at least 0, not %s", *jobTime)
	}
	o.JobTime = *jobTime
	switch st := balance.Strategy(*balanceBy); st {
	case balance.Strict, balance.Simple, balance.Auto:
		o.Balance = st
	default:
		return usagef("--balance must be strict, simple or auto, not %q", *balanceBy)
	}
	if *pool < 0 {
		return usagef("--pool must be at least 0, not %d", *pool)
	}
	if set["warmup"] {
		if *warmup < 0 || *warmup >= o.Duration {
			return usagef("--warmup must be at least 0 and shorter than --duration (%s), not %s", o.Duration, *warmup)
		}
		o.Warmup = *warmup
	}
	o.Progress = func(format string, args ...any) {
		fmt.Fprintf(errOut, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}

	names, err := pickDrivers(*drivers, map[string]string{"postgres": *pgDSN, "mysql": *myDSN, "redis": *redisURL}, errOut)
	if err != nil {
		return err
	}
	path := *sqlitePath
	if path == "" && slices.Contains(names, "sqlite") {
		dir, err := os.MkdirTemp("", "meridian-bench-")
		if err != nil {
			return fmt.Errorf("making a directory for the SQLite file: %w", err)
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "bench.db")
	}
	var lanes *int // --push-lanes
	if *pushLanes >= 0 {
		lanes = pushLanes
	}
	var targets []bench.Target
	for _, n := range names {
		switch n {
		case "memory":
			targets = append(targets, bench.Memory{})
		case "sqlite":
			t := bench.SQLite(path)
			t.KeepDone = *keepDone
			t.PushLanes = lanes
			t.SearchIndex = *searchIndex
			targets = append(targets, t)
		case "postgres":
			t := bench.Postgres(*pgDSN)
			t.Pool = *pool
			t.KeepDone = *keepDone
			t.PushLanes = lanes
			t.SearchIndex = *searchIndex
			targets = append(targets, t)
		case "mysql":
			t := bench.MySQL(*myDSN)
			t.Pool = *pool
			t.KeepDone = *keepDone
			t.PushLanes = lanes
			t.SearchIndex = *searchIndex
			targets = append(targets, t)
		case "redis":
			t, err := bench.NewRedis(*redisURL)
			if err != nil {
				return usagef("--redis-url: %v", err)
			}
			t.PushLanes = lanes
			targets = append(targets, t)
		}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("creating CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	fmt.Fprintf(out, "meridian bench: %s %s/%s, %d CPUs (GOMAXPROCS %d), %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "jobs %d, duration %s (warm-up %s), %s%d worker(s) x %d, prefetch %s,%s poll %s, producers %d x%d, chunk %d, dispatchers %d, latency %d/s for %s, baseline %d clients for %s%s\n\n",
		o.Jobs, o.Duration, o.Warmup, queuesText(o.Queues), o.Workers, o.Concurrency, prefetchText(o.Prefetch), jobTimeText(o.JobTime)+balanceText(o.Balance), o.Poll, o.Producers, o.BatchSize, o.ChunkSize, o.Dispatchers,
		o.Rate, o.LatencyDuration, o.BaselineConns, o.BaselineDuration, keepDoneText(*keepDone)+keptText(o.Kept, o.AnalyzeKept)+searchIndexText(*searchIndex))
	var errs []error
	results := bench.Results{Started: time.Now().UTC().Format(time.RFC3339)}
	for _, t := range targets {
		rep, err := bench.Run(ctx, t, o)
		results.Reports = append(results.Reports, rep)
		if _, werr := rep.WriteTo(out); werr != nil {
			return werr
		}
		if *showCalls {
			if werr := rep.WriteCalls(out); werr != nil {
				return werr
			}
		}
		fmt.Fprintln(out)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if *memProfile != "" {
		f, err := os.Create(*memProfile)
		if err != nil {
			return fmt.Errorf("creating allocation profile: %w", err)
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return fmt.Errorf("writing allocation profile: %w", err)
		}
	}
	if *jsonOut != "" {
		if err := writeResults(*jsonOut, results); err != nil {
			errs = append(errs, err)
		}
	}
	if *compareOld != "" {
		if err := compareResults(*compareOld, results, *failOver, out); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// prefetchText describes Options.Prefetch.
// keptText names --kept and --analyze-kept in the header when set.
func keptText(n int, analyzed bool) string {
	switch {
	case n == 0:
		return ""
	case analyzed:
		return fmt.Sprintf(", %d kept rows (analyzed)", n)
	}
	return fmt.Sprintf(", %d kept rows", n)
}

// keepDoneText names --keep-done in the header when it is set.
func keepDoneText(keep bool) string {
	if keep {
		return "; SQL stores keep done jobs (--keep-done)"
	}
	return ""
}

func searchIndexText(on bool) string {
	if on {
		return "; SQL stores with the payload search index (--search-index)"
	}
	return ""
}

// jobTimeText names the handlers' run time in the header, when set.
func jobTimeText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf(" handlers %s each,", d)
}

func balanceText(st balance.Strategy) string {
	if st == "" || st == balance.Strict {
		return ""
	}
	return fmt.Sprintf(" balance %s (a budget of the handlers),", st)
}

func prefetchText(n int) string {
	switch {
	case n < 0:
		return "off"
	case n == 0:
		return "default"
	}
	return fmt.Sprint(n)
}

// writeResults writes res as JSON to path.
func writeResults(path string, res bench.Results) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating JSON results: %w", err)
	}
	if err := res.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("writing JSON results: %w", err)
	}
	return f.Close()
}

// compareResults prints the deltas from the results in oldPath to cur,
// marking figures worse by more than 5% (or failOver when larger), and
// fails when failOver > 0 and a figure is worse by more than failOver.
func compareResults(oldPath string, cur bench.Results, failOver float64, out io.Writer) error {
	f, err := os.Open(oldPath)
	if err != nil {
		return fmt.Errorf("opening results to compare with: %w", err)
	}
	defer f.Close()
	old, err := bench.ReadResults(f)
	if err != nil {
		return err
	}
	threshold := 5.0
	if failOver > 0 {
		threshold = failOver
	}
	ds := bench.Compare(old, cur, threshold)
	fmt.Fprintf(out, "compared with %s (worse than %.1f%% marked):\n", oldPath, threshold)
	if err := bench.WriteDeltas(out, ds); err != nil {
		return err
	}
	if failOver > 0 {
		for _, d := range ds {
			if d.Worse {
				return fmt.Errorf("bench: %s %s is %.1f%% worse than in %s", d.Driver, d.Name, d.Change, oldPath)
			}
		}
	}
	return nil
}

// pickDrivers returns the drivers to measure: those listed, or by default
// memory, sqlite and each server whose DSN (dsn, by driver) is set. A
// listed server without a DSN is an error.
func pickDrivers(list string, dsn map[string]string, errOut io.Writer) ([]string, error) {
	flagFor := benchServerFlags
	if list == "" {
		var out []string
		for _, n := range benchDrivers {
			if d, server := dsn[n]; server && d == "" {
				fmt.Fprintf(errOut, "meridian bench: skipping %s: set %s to measure it\n", n, flagFor[n])
				continue
			}
			out = append(out, n)
		}
		return out, nil
	}
	var out []string
	for f := range strings.SplitSeq(list, ",") {
		n := strings.TrimSpace(f)
		if n == "sqlite3" {
			n = "sqlite"
		}
		if n == "mariadb" {
			n = "mysql"
		}
		if !slices.Contains(benchDrivers, n) {
			return nil, usagef("unknown driver %q (known: %s)", f, strings.Join(benchDrivers, ", "))
		}
		if d, server := dsn[n]; server && d == "" {
			return nil, usagef("driver %s needs a DSN: set %s", n, flagFor[n])
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
