package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "asynq bench:", err)
		os.Exit(1)
	}
}

// config is a comparison's settings.
type config struct {
	addr   string
	db     int
	rounds int
	fanout int
	check  time.Duration
	memory int // jobs queued for the memory measurement; 0 skips it
	modes  []bench.Mode
	opts   bench.Options
}

// parse reads the command line.
func parse(args []string, errOut io.Writer) (config, error) {
	fs := flag.NewFlagSet("asynq bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	d := bench.DefaultOptions
	var (
		addr        = fs.String("redis-addr", os.Getenv("MERIDIAN_REDIS_ADDR"), "Redis server, host:port (default $MERIDIAN_REDIS_ADDR)")
		db          = fs.Int("redis-db", 15, "Redis database both systems use; asynq's side empties it (FLUSHDB) before and after each measurement")
		rounds      = fs.Int("rounds", 3, "interleaved rounds; each runs every mode for both systems (0: only the memory measurement)")
		memory      = fs.Int("memory-jobs", 100_000, "jobs queued (ready, scheduled, unique) for the memory per job by key kind, measured once before the rounds; 0 skips it")
		modes       = fs.String("modes", "burndown,continuous,latency", "comma-separated modes: burndown, continuous, dispatch, latency")
		jobs        = fs.Int("jobs", 200_000, "jobs queued before each burn-down")
		duration    = fs.Duration("duration", 60*time.Second, "length of the continuous mode")
		warmup      = fs.Duration("warmup", d.Warmup, "start of the continuous mode left uncounted")
		concurrency = fs.Int("concurrency", d.Concurrency, "handler goroutines: Meridian's Concurrency, asynq's Config.Concurrency")
		poll        = fs.Duration("poll", d.Poll, "Meridian workers' idle poll interval")
		rate        = fs.Int("rate", d.Rate, "latency mode's dispatch rate in jobs/s")
		latencyDur  = fs.Duration("latency-duration", 60*time.Second, "length of the latency mode")
		fanout      = fs.Int("asynq-fanout", 16, "goroutines enqueueing the tasks of one asynq DispatchMany (asynq has no batch enqueue)")
		check       = fs.Duration("asynq-task-check-interval", 0, "asynq's Config.TaskCheckInterval, how long its processor sleeps when it finds no task (0: asynq's default, 1s)")
	)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *addr == "" {
		return config{}, errors.New("no Redis: set --redis-addr or MERIDIAN_REDIS_ADDR")
	}
	ms, err := bench.ParseModes(*modes)
	if err != nil {
		return config{}, err
	}
	if slices.Contains(ms, bench.ModeFailOnce) {
		return config{}, errors.New("the failonce mode is not compared with asynq")
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"jobs", *jobs}, {"concurrency", *concurrency}, {"rate", *rate}, {"asynq-fanout", *fanout}} {
		if v.n < 1 {
			return config{}, fmt.Errorf("--%s must be at least 1, not %d", v.name, v.n)
		}
	}
	if *rounds < 0 || *memory < 0 || *rounds == 0 && *memory == 0 {
		return config{}, fmt.Errorf("--rounds (%d) and --memory-jobs (%d) must be at least 0, and one of them positive", *rounds, *memory)
	}
	if *check < 0 {
		return config{}, fmt.Errorf("--asynq-task-check-interval must be at least 0, not %s", *check)
	}
	if *db < 0 {
		return config{}, fmt.Errorf("--redis-db must be at least 0, not %d", *db)
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"duration", *duration}, {"poll", *poll}, {"latency-duration", *latencyDur}} {
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
	return config{addr: *addr, db: *db, rounds: *rounds, fanout: *fanout, check: *check, memory: *memory, modes: ms, opts: o}, nil
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
	fmt.Fprintf(out, "asynq bench: asynq v0.26.0 against Meridian's redisqueue, %s %s/%s, %d CPUs, %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "%d round(s); Redis %s db %d; memory by key kind %d jobs of each variant; jobs %d, continuous %s (warm-up %s), latency %d/s for %s, concurrency %d; Meridian poll %s; asynq TaskCheckInterval %s, enqueue fan-out %d\n\n",
		c.rounds, c.addr, c.db, c.memory, c.opts.Jobs, c.opts.Duration, c.opts.Warmup, c.opts.Rate, c.opts.LatencyDuration, c.opts.Concurrency,
		c.opts.Poll, checkName(c.check), c.fanout)
	mem, err := measureAll(ctx, c)
	if c.rounds > 0 {
		if werr := mem.rounds.WriteTable(out); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return errors.Join(err, writeMemory(out, mem.memory))
}

// measured is what a run measured: the rounds' figures and the memory by
// key kind.
type measured struct {
	rounds *bench.Rounds
	memory []memoryResult
}

// measureAll measures the memory by key kind (unless c.memory is 0), then
// runs the rounds, and returns what it measured before an error.
func measureAll(ctx context.Context, c config) (measured, error) {
	m := measured{rounds: bench.NewRounds(systems...)}
	if c.memory > 0 {
		target, err := bench.NewRedis("redis://" + c.addr + "/" + strconv.Itoa(c.db))
		if err != nil {
			return m, err
		}
		if m.memory, err = measureMemory(ctx, c, target, c.memory); err != nil {
			return m, err
		}
	}
	if c.rounds == 0 {
		return m, nil
	}
	var err error
	m.rounds, err = compare(ctx, c)
	return m, err
}

// systems are the two sides of the comparison, in the order of odd rounds.
var systems = []string{"asynq", "Meridian"}

// compare runs c.rounds interleaved rounds and returns their figures, with
// those measured before an error.
func compare(ctx context.Context, c config) (*bench.Rounds, error) {
	res := bench.NewRounds(systems...)
	target, err := bench.NewRedis("redis://" + c.addr + "/" + strconv.Itoa(c.db))
	if err != nil {
		return res, err
	}
	o := c.opts
	o.ReadServerCPU = target.ServerCPU
	o.ReadStoreMemory = target.UsedMemory
	for round := 1; round <= c.rounds; round++ {
		order := slices.Clone(systems)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, m := range c.modes {
			for _, s := range order {
				o.Progress("round %d, %s, %s", round, m, s)
				var figs []bench.Figure
				if s == "asynq" {
					figs, err = measureAsynq(ctx, c, m, o)
				} else {
					figs, err = measureMeridian(ctx, target, m, o)
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

// measureAsynq measures mode m of asynq on an emptied database, emptied
// again afterwards.
func measureAsynq(ctx context.Context, c config, m bench.Mode, o bench.Options) ([]bench.Figure, error) {
	rdb := redis.NewClient(&redis.Options{Addr: c.addr, DB: c.db})
	defer rdb.Close()
	flush := func(ctx context.Context) error {
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			return fmt.Errorf("emptying Redis db %d: %w", c.db, err)
		}
		return nil
	}
	if err := flush(ctx); err != nil {
		return nil, err
	}
	e, err := newAsynq(asynq.RedisClientOpt{Addr: c.addr, DB: c.db}, c.fanout, c.check)
	if err != nil {
		return nil, err
	}
	figs, err := bench.Measure(ctx, e, m, o)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return figs, errors.Join(err, e.close(), flush(dctx))
}

// measureMeridian measures mode m of Meridian on a queue under a fresh
// key prefix, deleted afterwards.
func measureMeridian(ctx context.Context, t *bench.Redis, m bench.Mode, o bench.Options) ([]bench.Figure, error) {
	q, drop, err := t.NewQueue(ctx)
	if err != nil {
		return nil, err
	}
	figs, err := bench.Measure(ctx, bench.QueueEngine(q), m, o)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return figs, errors.Join(err, drop(dctx))
}

// checkName prints asynq's TaskCheckInterval setting.
func checkName(d time.Duration) string {
	if d == 0 {
		return "1s (its default)"
	}
	return d.String()
}
