package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/balance"
)

// Target is one driver under test. Run calls its methods from one
// goroutine at a time.
type Target interface {
	// Name is the driver's name in reports: memory, sqlite, postgres, mysql.
	Name() string
	// NewQueue returns an empty queue in storage of its own (for SQL, tables
	// with a unique name, already set up) and a function that releases it
	// and drops that storage. The caller stops using the queue before it
	// calls the function.
	NewQueue(ctx context.Context) (queue.Queue, func(context.Context) error, error)
	// Baseline measures single-row INSERT transactions per second from conns
	// connections for d, in a table of its own that it drops afterwards. ok
	// is false when the target has no database to measure (memory).
	Baseline(ctx context.Context, conns int, d time.Duration) (tps float64, ok bool, err error)
}

// InProcess is a Target whose queues keep their jobs in this process's
// heap (memory): the burn-down also reports the heap held per queued job.
type InProcess interface {
	// InProcess marks the target; it does nothing.
	InProcess()
}

// BaselineNamer is a Target whose baseline is not a single-row INSERT
// (Redis: an HSET of a new key).
type BaselineNamer interface {
	// BaselineName says what one baseline operation is, e.g. "1-key HSET".
	BaselineName() string
}

// StoreMemory is a Target whose store can say how much memory it holds
// (Redis: INFO memory's used_memory).
type StoreMemory interface {
	// UsedMemory returns the bytes the store holds now.
	UsedMemory(ctx context.Context) (uint64, error)
}

// Analyzer is a Target whose database keeps planner statistics that
// Options.Analyze can refresh.
type Analyzer interface {
	// Analyze refreshes the statistics of the tables of q, a queue the
	// target made (possibly wrapped by the harness).
	Analyze(ctx context.Context, q queue.Queue) error
}

// Keeper is a Target that can fill a queue's table with kept rows
// (Options.Kept) faster than dispatching them.
type Keeper interface {
	// Keep writes n rows of finished work on queue name into the jobs
	// table of q, a queue the target made: 85% done, 10% pending and
	// scheduled one to ten hours ahead, 5% dead.
	Keep(ctx context.Context, q queue.Queue, name string, n int) error
}

// Mode names a group of figures Run can measure.
type Mode string

// The modes, in the order Run measures them.
const (
	ModeBurnDown   Mode = "burndown"
	ModeContinuous Mode = "continuous"
	ModeDispatch   Mode = "dispatch"
	ModeLatency    Mode = "latency"
	// ModeFailOnce is the burn-down where every job's first attempt fails
	// and its retry, due at once, succeeds: the price of a failure's
	// outcome reaching the store. It runs only when named, not in "all".
	ModeFailOnce Mode = "failonce"
	// ModeFlood is the flood and trickle: one queue flooded, another fed
	// one job at a time, under strict order, Auto and weights 6:1 (see
	// flood). It runs only when named, not in "all".
	ModeFlood Mode = "flood"
)

// AllModes lists every mode "all" runs, in the order Run measures them.
var AllModes = []Mode{ModeBurnDown, ModeContinuous, ModeDispatch, ModeLatency}

// knownModes is every mode Run knows, in the order it measures them.
var knownModes = []Mode{ModeBurnDown, ModeFailOnce, ModeContinuous, ModeDispatch, ModeLatency, ModeFlood}

// ParseModes parses a comma-separated list of modes; "all" or "" is every
// mode of AllModes.
func ParseModes(s string) ([]Mode, error) {
	if s == "" || s == "all" {
		return slices.Clone(AllModes), nil
	}
	var out []Mode
	for f := range strings.SplitSeq(s, ",") {
		m := Mode(strings.TrimSpace(f))
		if !slices.Contains(knownModes, m) {
			return nil, fmt.Errorf("bench: unknown mode %q (known: burndown, failonce, continuous, dispatch, latency, all)", f)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// Options sizes a run. Zero fields take the values of DefaultOptions.
type Options struct {
	Modes []Mode

	// Jobs is how many jobs burn-down queues before the workers start.
	Jobs int
	// Duration bounds the continuous mode and each dispatch-only figure.
	Duration time.Duration
	// Warmup is the start of the continuous mode that is not counted.
	Warmup time.Duration

	// Workers is how many Worker values run, each with Concurrency
	// handler goroutines; Poll is their idle poll interval.
	Workers     int
	Concurrency int
	Poll        time.Duration
	// Prefetch caps the jobs each Worker reserves ahead of its free
	// handlers (queue.Worker.Prefetch): zero keeps the Worker's default
	// (1000), a negative value turns prefetch off. A Reserve asks for the
	// free handlers' jobs plus this buffer's room, so a claim can carry
	// more jobs than Concurrency.
	Prefetch int
	// JobTime is how long each handler of the burn-down and continuous
	// modes runs (it sleeps): zero is a no-op handler. Jobs that take
	// time keep the handlers busy, where the no-op ones leave them idle
	// between reservations.
	JobTime time.Duration
	// Balance, when balance.Simple or balance.Auto, runs each Worker of
	// the burn-down, continuous and latency modes under a budget of
	// Concurrency handlers shared among its queues (queue.Worker.Balance);
	// empty or balance.Strict is strict order.
	Balance balance.Strategy

	// Queues is how many queues the modes spread their jobs over (the
	// flood mode has its own two): each DispatchMany and Dispatch goes to
	// the next queue in turn, and Worker i works every queue in strict
	// order starting at queue i, so with Workers a multiple of Queues each
	// queue has workers of its own first. Zero or one is the default
	// queue alone. A target that is a Spreader names them (a Redis
	// Cluster: on different masters); otherwise they are q0, q1, ... .
	Queues int

	// Producers is how many goroutines dispatch batches with DispatchMany
	// (burn-down fill, continuous, dispatch-only); BatchSize is the batch
	// of a continuous producer and ChunkSize the batch of the fill and of
	// the DispatchMany dispatch figure.
	Producers int
	BatchSize int
	ChunkSize int
	// MaxBacklog pauses continuous producers while more than this many
	// dispatched jobs are not yet handled.
	MaxBacklog int
	// Dispatchers is how many goroutines call Dispatch in the single
	// dispatch figure and in the latency mode.
	Dispatchers int

	// Rate is the latency mode's steady dispatch rate in jobs/s, for
	// LatencyDuration.
	Rate            int
	LatencyDuration time.Duration

	// The flood mode: FloodJobs jobs of FloodWork each queued on one
	// queue, one job every TrickleEvery on another for FloodFor, a worker
	// of FloodBudget handlers over both.
	FloodJobs    int
	FloodWork    time.Duration
	TrickleEvery time.Duration
	FloodFor     time.Duration
	FloodBudget  int

	// BaselineConns and BaselineDuration size the INSERT baseline.
	BaselineConns    int
	BaselineDuration time.Duration

	// Analyze refreshes the database's statistics of the jobs table after
	// the burn-down's fill, as autovacuum does on a production server
	// (a fresh table has none, and the planner then guesses). Targets
	// that are not Analyzers ignore it.
	Analyze bool

	// Kept, when positive, fills each mode's fresh jobs table with this
	// many rows of finished work before the mode starts, shaped as a
	// production table that keeps its jobs (retention on): 85% done,
	// 10% scheduled one to ten hours ahead, 5% dead, in one bulk
	// statement per 100,000 rows on the server (see Keeper). The mode's
	// own jobs then run beside them: how a claim's and an ack's cost
	// grows with the kept rows. Targets that are not Keepers refuse it.
	Kept int
	// AnalyzeKept refreshes the table's statistics (Analyzer) once the
	// kept rows are written and before the mode queues its jobs: the
	// planner then knows the kept rows but not the backlog (stale
	// statistics). Without it and without Analyze the table has none
	// (missing); with both, fresh ones after the burn-down's fill.
	AnalyzeKept bool

	// ReadServerCPU, when set, reads the database server's CPU time (see
	// ServerCPU), for the burn-down's server CPU figures. Run sets it from
	// a target that is a ServerCPU.
	ReadServerCPU func() (time.Duration, bool)

	// ReadNodesCPU, when set, reads each server node's CPU time (see
	// NodesCPU), for the per-master CPU figures. Run sets it from a target
	// that is a NodesCPU.
	ReadNodesCPU func() (map[string]time.Duration, bool)

	// ReadStoreMemory, when set, reads the memory the store holds (see
	// StoreMemory): the burn-down then reports the store's memory per
	// queued job. Run sets it from a target that is a StoreMemory.
	ReadStoreMemory func(ctx context.Context) (uint64, error)

	// failFirst makes the workers fail every job's first attempt and
	// retry it at once, set by the fail-once mode.
	failFirst bool

	// heldPerJob makes the burn-down report the heap held per queued job,
	// set by Run for an InProcess target.
	heldPerJob bool

	// Progress, when set, receives one line per step.
	Progress func(format string, args ...any)

	// analyze is Analyze bound to the target and the mode's queue, set by
	// Run.
	analyze func(ctx context.Context) error
}

// DefaultOptions are the sizes of a full `meridian bench` run: a few
// minutes over four drivers on a small machine.
var DefaultOptions = Options{
	Modes:            AllModes,
	Jobs:             1_000_000,
	Duration:         8 * time.Second,
	Warmup:           2 * time.Second,
	Workers:          1,
	Concurrency:      1000,
	Poll:             50 * time.Millisecond,
	Producers:        2,
	BatchSize:        1000,
	ChunkSize:        1000,
	MaxBacklog:       20_000,
	Dispatchers:      8,
	Rate:             1000,
	LatencyDuration:  5 * time.Second,
	FloodJobs:        100_000,
	FloodWork:        2 * time.Millisecond,
	TrickleEvery:     time.Second,
	FloodFor:         20 * time.Second,
	FloodBudget:      20,
	BaselineConns:    8,
	BaselineDuration: 5 * time.Second,
}

// QuickOptions are the sizes of a smoke run (`meridian bench --quick`):
// seconds per driver, figures too noisy to quote.
var QuickOptions = func() Options {
	o := DefaultOptions
	o.Jobs = 20_000
	o.Duration = time.Second
	o.Warmup = 200 * time.Millisecond
	o.LatencyDuration = time.Second
	o.BaselineDuration = time.Second
	o.FloodJobs = 5_000
	o.FloodFor = 3 * time.Second
	o.TrickleEvery = 200 * time.Millisecond
	return o
}()

// withDefaults fills o's zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions
	if len(o.Modes) == 0 {
		o.Modes = d.Modes
	}
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setDur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setInt(&o.Jobs, d.Jobs)
	setDur(&o.Duration, d.Duration)
	if o.Warmup < 0 || o.Warmup >= o.Duration {
		o.Warmup = o.Duration / 4
	}
	setInt(&o.Workers, d.Workers)
	setInt(&o.Concurrency, d.Concurrency)
	setDur(&o.Poll, d.Poll)
	setInt(&o.Producers, d.Producers)
	setInt(&o.BatchSize, d.BatchSize)
	setInt(&o.ChunkSize, d.ChunkSize)
	setInt(&o.MaxBacklog, d.MaxBacklog)
	setInt(&o.Dispatchers, d.Dispatchers)
	setInt(&o.Rate, d.Rate)
	setDur(&o.LatencyDuration, d.LatencyDuration)
	setInt(&o.FloodJobs, d.FloodJobs)
	setDur(&o.FloodWork, d.FloodWork)
	setDur(&o.TrickleEvery, d.TrickleEvery)
	setDur(&o.FloodFor, d.FloodFor)
	setInt(&o.FloodBudget, d.FloodBudget)
	setInt(&o.BaselineConns, d.BaselineConns)
	setDur(&o.BaselineDuration, d.BaselineDuration)
	return o
}

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// Unit is what a Figure counts.
type Unit string

// The units of figures.
const (
	PerSecond Unit = "jobs/s"
	// PerCoreSecond counts jobs per second of one server core wholly
	// busy with them: jobs divided by the server CPU seconds they took.
	PerCoreSecond Unit = "jobs/core-s"
	Milliseconds  Unit = "ms"
	Bytes         Unit = "B"
)

// Figure is one measured number.
type Figure struct {
	// Name says what was measured, e.g. "burn-down (1000000 jobs)".
	Name  string
	Value float64
	Unit  Unit
}

// Report is the outcome of one Run over one target.
type Report struct {
	Driver string
	// BaselineName says what the baseline measures: "1-row INSERT tx"
	// for SQL, or the target's BaselineName.
	BaselineName string
	// Baseline is the INSERT transactions per second measured beside the
	// figures: the mean of BaselineBefore and BaselineAfter, measured
	// before the first mode and after the last, so that a machine whose
	// load changes during the run moves both sides of every ratio. Zero
	// when the target has none.
	Baseline, BaselineBefore, BaselineAfter float64
	BaselineConns                           int
	Figures                                 []Figure
	// Calls says, per mode, how many driver calls the mode made and how
	// many jobs each carried (see Calls.String).
	Calls []ModeCalls
}

// ModeCalls is the driver calls one mode made.
type ModeCalls struct {
	Mode  string
	Calls string
}

// WriteCalls writes the driver calls of each mode, one line per mode.
func (r Report) WriteCalls(w io.Writer) error {
	for _, c := range r.Calls {
		if _, err := fmt.Fprintf(w, "%-9s calls in %-14s %s\n", r.Driver, c.Mode+":", c.Calls); err != nil {
			return err
		}
	}
	return nil
}

// Ratio returns f's value as a multiple of the report's baseline, and false
// when there is no baseline or f is not a throughput.
func (r Report) Ratio(f Figure) (float64, bool) {
	if r.Baseline <= 0 || f.Unit != PerSecond {
		return 0, false
	}
	return f.Value / r.Baseline, true
}

// Figure returns the figure whose name starts with prefix.
func (r Report) Figure(prefix string) (Figure, bool) {
	for _, f := range r.Figures {
		if strings.HasPrefix(f.Name, prefix) {
			return f, true
		}
	}
	return Figure{}, false
}

// WriteTo writes the report, one line per figure: the baseline first, then
// each figure with its ratio to the baseline when it has one.
func (r Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	if r.Baseline > 0 {
		fmt.Fprintf(&b, "%-9s %-48s %12s inserts/s (the baseline, 1.00x; mean of %s before and %s after)\n", r.Driver,
			fmt.Sprintf("baseline: %s, %d clients", cmp.Or(r.BaselineName, "1-row INSERT tx"), r.BaselineConns), thousands(r.Baseline),
			thousands(r.BaselineBefore), thousands(r.BaselineAfter))
	}
	for _, f := range r.Figures {
		val := thousands(f.Value)
		if f.Unit == Milliseconds {
			val = fmt.Sprintf("%.2f", f.Value)
		}
		line := fmt.Sprintf("%-9s %-48s %12s %-9s", r.Driver, f.Name, val, f.Unit)
		if ratio, ok := r.Ratio(f); ok {
			line += fmt.Sprintf(" %5.2fx baseline", ratio)
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// thousands formats v rounded to an integer with comma separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Run measures t in the modes of opts and returns the report. It stops at
// the first error, with the figures measured so far in the report.
func Run(ctx context.Context, t Target, opts Options) (Report, error) {
	o := opts.withDefaults()
	if s, ok := t.(ServerCPU); ok && o.ReadServerCPU == nil {
		o.ReadServerCPU = s.ServerCPU
	}
	if _, ok := t.(InProcess); ok {
		o.heldPerJob = true
	}
	if n, ok := t.(NodesCPU); ok && o.ReadNodesCPU == nil {
		o.ReadNodesCPU = n.NodesCPU
	}
	if m, ok := t.(StoreMemory); ok && o.ReadStoreMemory == nil {
		o.ReadStoreMemory = m.UsedMemory
	}
	rep := Report{Driver: t.Name(), BaselineName: "1-row INSERT tx", BaselineConns: o.BaselineConns}
	if n, ok := t.(BaselineNamer); ok {
		rep.BaselineName = n.BaselineName()
	}
	o.progress("%s: starting", t.Name())
	tps, hasBaseline, err := t.Baseline(ctx, o.BaselineConns, o.BaselineDuration)
	if err != nil {
		return rep, fmt.Errorf("bench: %s baseline: %w", t.Name(), err)
	}
	if hasBaseline {
		rep.Baseline, rep.BaselineBefore, rep.BaselineAfter = tps, tps, tps
		o.progress("  baseline before: %.0f %s/s from %d connections", tps, rep.BaselineName, o.BaselineConns)
	}
	for _, m := range knownModes {
		if !slices.Contains(o.Modes, m) {
			continue
		}
		measure := func(name string, fn func(e Engine, o Options) ([]Figure, error)) error {
			figs, calls, err := withQueue(ctx, t, func(q, raw queue.Queue) ([]Figure, error) {
				o := o
				if a, ok := t.(Analyzer); ok && o.Analyze {
					o.analyze = func(ctx context.Context) error { return a.Analyze(ctx, q) }
				}
				names, err := spreadQueues(ctx, t, raw, o.Queues)
				if err != nil {
					return nil, err
				}
				if err := keep(ctx, t, raw, names, o); err != nil {
					return nil, err
				}
				return fn(QueuesEngine(q, names...), o)
			})
			rep.Figures = append(rep.Figures, figs...)
			rep.Calls = append(rep.Calls, ModeCalls{Mode: name, Calls: calls.String()})
			return err
		}
		switch m {
		case ModeBurnDown:
			err = measure("burn-down", func(e Engine, o Options) ([]Figure, error) { return burnDown(ctx, e, o) })
		case ModeFailOnce:
			err = measure("fail-once burn-down", func(e Engine, o Options) ([]Figure, error) { return failOnce(ctx, e, o) })
		case ModeContinuous:
			err = measure("continuous", func(e Engine, o Options) ([]Figure, error) { return continuous(ctx, e, o) })
		case ModeDispatch:
			err = measure("Dispatch", func(e Engine, o Options) ([]Figure, error) { return dispatchOne(ctx, e, o) })
			if err == nil {
				err = measure("DispatchMany", func(e Engine, o Options) ([]Figure, error) { return dispatchMany(ctx, e, o) })
			}
		case ModeLatency:
			err = measure("latency", func(e Engine, o Options) ([]Figure, error) { return latency(ctx, e, o) })
		case ModeFlood:
			err = measure("flood", func(e Engine, o Options) ([]Figure, error) { return Measure(ctx, e, ModeFlood, o) })
		}
		if err != nil {
			return rep, fmt.Errorf("bench: %s %s: %w", t.Name(), m, err)
		}
	}
	if hasBaseline {
		after, _, err := t.Baseline(ctx, o.BaselineConns, o.BaselineDuration)
		if err != nil {
			return rep, fmt.Errorf("bench: %s baseline after the modes: %w", t.Name(), err)
		}
		rep.BaselineAfter = after
		rep.Baseline = (rep.BaselineBefore + after) / 2
		o.progress("  baseline after: %.0f %s/s", after, rep.BaselineName)
	}
	return rep, nil
}

// keep writes o.Kept kept rows into q, a queue t made, on the first of
// names (the default queue when none), and analyzes them when
// o.AnalyzeKept.
func keep(ctx context.Context, t Target, q queue.Queue, names []string, o Options) error {
	if o.Kept <= 0 {
		return nil
	}
	k, ok := t.(Keeper)
	if !ok {
		return fmt.Errorf("%s cannot keep finished rows (Options.Kept runs on the SQL stores)", t.Name())
	}
	name := queue.DefaultQueue
	if len(names) > 0 {
		name = names[0]
	}
	o.progress("  writing %d kept rows (85%% done, 10%% scheduled, 5%% dead)", o.Kept)
	start := time.Now()
	if err := k.Keep(ctx, q, name, o.Kept); err != nil {
		return fmt.Errorf("writing %d kept rows: %w", o.Kept, err)
	}
	o.progress("  kept rows written in %s", time.Since(start).Round(time.Millisecond))
	if a, ok := t.(Analyzer); ok && o.AnalyzeKept {
		if err := a.Analyze(ctx, q); err != nil {
			return fmt.Errorf("analyzing the kept rows: %w", err)
		}
	}
	return nil
}

// Spreader is a Target whose store shards queues by name (a Redis
// Cluster, by the hash slot of the queue's keys): it names queues that
// fall on different shards.
type Spreader interface {
	// SpreadQueues names n queues of q, a queue the target made, spread
	// over the shards as evenly as they can be.
	SpreadQueues(ctx context.Context, q queue.Queue, n int) ([]string, error)
}

// spreadQueues names the n queues of Options.Queues on q, a queue t made:
// none (the default queue) for n below 2, t's own names when it is a
// Spreader, else q0, q1, ... .
func spreadQueues(ctx context.Context, t Target, q queue.Queue, n int) ([]string, error) {
	if n < 2 {
		return nil, nil
	}
	s, ok := t.(Spreader)
	if !ok {
		return queueNames(n), nil
	}
	names, err := s.SpreadQueues(ctx, q, n)
	if err != nil {
		return nil, fmt.Errorf("naming %d queues: %w", n, err)
	}
	return names, nil
}

// withQueue runs fn on a fresh queue of t, counting its calls (q; raw is
// the queue as t made it), and drops the queue afterwards, even when fn
// fails or ctx is done.
func withQueue(ctx context.Context, t Target, fn func(q, raw queue.Queue) ([]Figure, error)) ([]Figure, *Calls, error) {
	q, drop, err := t.NewQueue(ctx)
	if err != nil {
		return nil, &Calls{}, fmt.Errorf("making a fresh queue: %w", err)
	}
	cq, calls := count(q)
	figs, err := fn(cq, q)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if derr := drop(dctx); derr != nil {
		err = errors.Join(err, fmt.Errorf("dropping the bench queue: %w", derr))
	}
	return figs, calls, err
}

// quiet discards the workers' logs: a bench run prints figures only.
var quiet = slog.New(slog.DiscardHandler)
