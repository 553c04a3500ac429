package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

func TestPercentiles(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[99-i] = time.Duration(i+1) * time.Millisecond // unsorted on purpose
	}
	tests := []struct {
		name    string
		samples []time.Duration
		ps      []float64
		want    []time.Duration
	}{
		{"empty", nil, []float64{50, 99}, ms(0, 0)},
		{"one", ms(7), []float64{50, 95, 99, 100}, ms(7, 7, 7, 7)},
		{"hundred", hundred, []float64{1, 50, 95, 99, 100}, ms(1, 50, 95, 99, 100)},
		{"nearest rank rounds up", ms(40, 10, 30, 20), []float64{25, 26, 50, 51, 75, 100}, ms(10, 20, 20, 30, 30, 40)},
		{"tiny percentile is the minimum", ms(3, 1, 2), []float64{0.001}, ms(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := append([]time.Duration(nil), tt.samples...)
			got := Percentiles(tt.samples, tt.ps...)
			for i := range tt.want {
				if got[i] != tt.want[i] {
					t.Errorf("p%v = %v, want %v", tt.ps[i], got[i], tt.want[i])
				}
			}
			for i := range before {
				if tt.samples[i] != before[i] {
					t.Fatalf("Percentiles modified its input at %d", i)
				}
			}
		})
	}
}

func TestParseModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []Mode
		wantErr bool
	}{
		{"", AllModes, false},
		{"all", AllModes, false},
		{"latency", []Mode{ModeLatency}, false},
		{"burndown, dispatch,burndown", []Mode{ModeBurnDown, ModeDispatch}, false},
		{"burndown,fast", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseModes(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseModes(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if strings.Join(modeStrings(got), ",") != strings.Join(modeStrings(tt.want), ",") {
			t.Errorf("ParseModes(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func modeStrings(ms []Mode) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m))
	}
	return out
}

func TestReportRatios(t *testing.T) {
	t.Parallel()
	r := Report{Driver: "postgres", Baseline: 10000, BaselineBefore: 9000, BaselineAfter: 11000, BaselineConns: 8, Figures: []Figure{
		{Name: "burn-down: work", Value: 34000, Unit: PerSecond},
		{Name: "latency p50", Value: 1.5, Unit: Milliseconds},
	}}
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want baseline + 2 figures:\n%s", len(lines), b.String())
	}
	for i, want := range []string{"10,000 inserts/s (the baseline, 1.00x; mean of 9,000 before and 11,000 after)", "34,000 jobs/s     3.40x baseline", "1.50 ms"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], want)
		}
	}
	if strings.Contains(lines[2], "baseline") {
		t.Errorf("a latency has no ratio, got %q", lines[2])
	}

	mem := Report{Driver: "memory", Figures: r.Figures}
	b.Reset()
	if _, err := mem.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "baseline") {
		t.Errorf("memory has no baseline, got:\n%s", b.String())
	}
	if _, ok := mem.Ratio(mem.Figures[0]); ok {
		t.Error("Ratio without a baseline reported ok")
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -45000: "-45,000"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

// tiny are options for a run over memory that takes about a second.
var tiny = Options{
	Jobs: 2000, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond,
	Concurrency: 10, Poll: 20 * time.Millisecond, Producers: 2, BatchSize: 100, ChunkSize: 100,
	MaxBacklog: 1000, Dispatchers: 2, Rate: 500, LatencyDuration: 200 * time.Millisecond,
}

func TestRunMemory(t *testing.T) {
	t.Parallel()
	rep, err := Run(context.Background(), Memory{}, tiny)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Baseline != 0 {
		t.Errorf("memory baseline = %v, want none", rep.Baseline)
	}
	for _, prefix := range []string{
		"burn-down: queue", "burn-down: work", "continuous", "dispatch: Dispatch,",
		"dispatch: DispatchMany", "dispatch: one DispatchMany", "latency p50", "latency p95", "latency p99", "latency max", "latency: the Dispatch call itself, p50",
	} {
		f, ok := rep.Figure(prefix)
		if !ok {
			t.Errorf("no figure %q in %+v", prefix, rep.Figures)
			continue
		}
		if !(f.Value > 0) {
			t.Errorf("%s = %v, want a positive number", f.Name, f.Value)
		}
	}
	if len(rep.Calls) != 5 {
		t.Fatalf("calls of %d modes, want 5: %+v", len(rep.Calls), rep.Calls)
	}
	for _, c := range rep.Calls {
		// The Worker reserves its idle handlers' jobs counted by the
		// claim (ReserveStarting): a burn-down prefetches beside them
		// (ReserveUnstarted), and at a low rate every job finds a handler
		// idle.
		want := "ReserveStarting "
		switch c.Mode {
		case "Dispatch":
			want = "Push "
		case "DispatchMany":
			want = "PushMany "
		}
		if !strings.Contains(c.Calls, want) {
			t.Errorf("calls in %s = %q, want it to count %q", c.Mode, c.Calls, want)
		}
	}
	p50, _ := rep.Figure("latency p50")
	p99, _ := rep.Figure("latency p99")
	if p50.Value > p99.Value {
		t.Errorf("p50 %v > p99 %v", p50.Value, p99.Value)
	}
	if top, _ := rep.Figure("latency max"); p99.Value > top.Value {
		t.Errorf("p99 %v > max %v", p99.Value, top.Value)
	}
}

func TestCallsString(t *testing.T) {
	t.Parallel()
	var c Calls
	if got := c.String(); got != "" {
		t.Errorf("no calls = %q, want empty", got)
	}
	c.Reserve.Add(4)
	c.Reserved.Add(10)
	c.EmptyReserve.Add(1)
	c.ReserveNanos.Add(int64(8 * time.Millisecond))
	c.Wait.Add(2)
	want := "Reserve 4 calls x 2.5 jobs (2.00 ms each); 1 of them empty; Wait 2"
	if got := c.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := tiny
	o.Modes = []Mode{ModeContinuous}
	if _, err := Run(ctx, Memory{}, o); err == nil {
		t.Fatal("Run with a cancelled context succeeded")
	}
}

func TestRunSQL(t *testing.T) {
	t.Parallel()
	for _, target := range sqlTestTargets(t) {
		t.Run(target.Name(), func(t *testing.T) {
			o := tiny
			o.BaselineDuration = 200 * time.Millisecond
			o.Modes = []Mode{ModeBurnDown, ModeDispatch}
			o.Analyze = true
			var mu sync.Mutex
			var steps []string
			o.Progress = func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				steps = append(steps, fmt.Sprintf(format, args...))
			}
			rep, err := Run(context.Background(), target, o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(steps, func(s string) bool { return strings.Contains(s, "ANALYZE") }) {
				t.Errorf("no ANALYZE step among %q", steps)
			}
			if !(rep.BaselineBefore > 0 && rep.BaselineAfter > 0) || rep.Baseline != (rep.BaselineBefore+rep.BaselineAfter)/2 {
				t.Errorf("baseline = %v (before %v, after %v), want the mean of two positive rates", rep.Baseline, rep.BaselineBefore, rep.BaselineAfter)
			}
			for _, f := range rep.Figures {
				if !(f.Value > 0) {
					t.Errorf("%s = %v, want a positive number", f.Name, f.Value)
				}
			}
			if _, ok := rep.Figure("burn-down: work"); !ok {
				t.Errorf("no burn-down figure in %+v", rep.Figures)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		ticks      int64
		comm       string
		ppid       int
		bad        bool
	}{
		{"postgres backend", "4242 (postgres) S 812 4242 4242 0 -1 4194560 1234 0 0 0 150 25 7 3 20 0 1 0 100 200000 300 18446744073709551615", 185, "postgres", 812, false},
		{"a name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0", 10, "a (b) c", 1, false},
		{"short", "7 (x) R 1 2 3", 0, "", 0, true},
		{"no name", "7 x R 1", 0, "", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 a 2 3 4 20", 0, "", 0, true},
		{"parent not a number", "7 (x) R ? 7 7 0 -1 0 0 0 0 0 1 2 3 4 20", 0, "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, err := parseStat(tt.line)
			if (err != nil) != tt.bad {
				t.Fatalf("parseStat error = %v, want error %v", err, tt.bad)
			}
			if want := (procStat{tt.ticks, tt.comm, tt.ppid}); !tt.bad && st != want {
				t.Errorf("parseStat = %+v, want %+v", st, want)
			}
		})
	}
}

func TestLocalDSN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dsn  string
		want bool
	}{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", true},
		{"postgres://u@localhost/db", true},
		{"postgres://u@db.example.com/db", false},
		{"postgres:///db?host=/var/run/postgresql", true},
		{"host=10.0.0.5 user=u dbname=d", false},
		{"user=u dbname=d", true},
		{"root@tcp(127.0.0.1:3306)/test", true},
		{"root@tcp(db.internal:3306)/test", false},
		{"root@unix(/run/mysqld/mysqld.sock)/test", true},
	}
	for _, tt := range tests {
		if got := localDSN(tt.dsn); got != tt.want {
			t.Errorf("localDSN(%q) = %v, want %v", tt.dsn, got, tt.want)
		}
	}
}

// TestTreeCPU: a child's time stays in the tree after it ends (the parent
// reaped it), so readings never fall; a process that does not exist has
// no reading.
func TestTreeCPU(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	before, ok := TreeCPU(os.Getpid())
	if !ok {
		t.Fatal("TreeCPU of this process: no reading")
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	if err := cmd.Start(); err != nil {
		t.Skipf("no shell to run a child: %v", err)
	}
	during, ok := TreeCPU(os.Getpid())
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	after, ok2 := TreeCPU(os.Getpid())
	if !ok || !ok2 || during < before || after < during {
		t.Errorf("TreeCPU read %v, %v (%v), %v (%v): want readings that never fall", before, during, ok, after, ok2)
	}
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if after-before < child-10*time.Millisecond { // one clock tick of rounding
		t.Errorf("TreeCPU grew by %v across a child that used %v", after-before, child)
	}
	if _, ok := TreeCPU(1 << 30); ok {
		t.Error("TreeCPU of a process that does not exist gave a reading")
	}
}

// TestFloodModeRuns runs the flood mode with tiny numbers on the memory
// target: its four variants each report the trickle's percentiles and the
// flooded queue's rate. It checks the mode works, not the figures.
func TestFloodModeRuns(t *testing.T) {
	t.Parallel()
	o := Options{Modes: []Mode{ModeFlood}, FloodJobs: 200, FloodWork: time.Millisecond, TrickleEvery: 20 * time.Millisecond,
		FloodFor: 300 * time.Millisecond, FloodBudget: 4, Poll: 10 * time.Millisecond, BaselineDuration: time.Millisecond}
	rep, err := Run(t.Context(), Memory{}, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"strict", "auto", "auto, shift 2", "weights 6:1"} {
		for _, f := range []string{"trickle dispatch to start p99", "flooded queue"} {
			name := "flood, " + v + ": " + f
			if _, ok := rep.Figure(name); !ok {
				t.Errorf("no figure %q in %v", name, rep.Figures)
			}
		}
	}
}

// TestKeepDone checks that a SQL target with KeepDone keeps the jobs a
// burn-down worked in the done state, and that one without deletes them.
func TestKeepDone(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		for _, target := range sqlTestTargets(t) {
			t.Run(fmt.Sprintf("%s/keep=%v", target.Name(), keep), func(t *testing.T) {
				s := target.(*SQL)
				s.KeepDone = keep
				ctx := context.Background()
				q, drop, err := s.NewQueue(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := drop(ctx); err != nil {
						t.Error(err)
					}
				}()
				o := tiny
				if _, err := Measure(ctx, QueueEngine(q), ModeBurnDown, o); err != nil {
					t.Fatal(err)
				}
				cs := countsOf(ctx, t, q)
				var done int64
				for _, c := range cs {
					done += c.Done
				}
				want := int64(0)
				if keep {
					want = int64(o.withDefaults().Jobs)
				}
				if done != want {
					t.Errorf("%d done jobs after a burn-down of %d, want %d", done, o.withDefaults().Jobs, want)
				}
			})
		}
	}
}

// TestKept checks the kept rows' shape on every SQL store (85% done, 10%
// scheduled, 5% dead, counted by the store), that a burn-down runs beside
// them without claiming a scheduled or dead one, and that a target
// without kept rows refuses the option.
func TestKept(t *testing.T) {
	t.Parallel()
	for _, target := range sqlTestTargets(t) {
		t.Run(target.Name(), func(t *testing.T) {
			s := target.(*SQL)
			s.KeepDone = true
			ctx := context.Background()
			q, drop, err := s.NewQueue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := drop(ctx); err != nil {
					t.Error(err)
				}
			}()
			const kept = 400
			if err := s.Keep(ctx, q, queue.DefaultQueue, kept); err != nil {
				t.Fatal(err)
			}
			o := tiny
			jobs := o.withDefaults().Jobs
			if _, err := Measure(ctx, QueueEngine(q), ModeBurnDown, o); err != nil {
				t.Fatal(err)
			}
			cs := countsOf(ctx, t, q)
			var got driver.QueueCounts
			for _, c := range cs {
				got.Done += c.Done
				got.Dead += c.Dead
				got.Pending += c.Pending
				got.Scheduled.N += c.Scheduled.N
			}
			want := driver.QueueCounts{Done: kept*17/20 + int64(jobs), Dead: kept / 20, Pending: kept / 10, Scheduled: driver.Count{N: kept / 10}}
			if got.Done != want.Done || got.Dead != want.Dead || got.Pending != want.Pending || got.Scheduled.N != want.Scheduled.N {
				t.Errorf("after %d kept rows and a burn-down of %d: done %d, dead %d, pending %d (scheduled %d); want %d, %d, %d (%d)",
					kept, jobs, got.Done, got.Dead, got.Pending, got.Scheduled.N, want.Done, want.Dead, want.Pending, want.Scheduled.N)
			}
		})
	}
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		o := tiny
		o.Modes, o.Kept = []Mode{ModeBurnDown}, 10
		if _, err := Run(context.Background(), Memory{}, o); err == nil || !strings.Contains(err.Error(), "cannot keep") {
			t.Errorf("Run on memory with Kept = %v, want the refusal", err)
		}
	})
}

// countsOf returns the counts of q, a store that counts its jobs.
func countsOf(ctx context.Context, t *testing.T, q queue.Queue) []driver.QueueCounts {
	t.Helper()
	counter, ok := q.(interface {
		Counts(context.Context) ([]driver.QueueCounts, error)
	})
	if !ok {
		t.Fatalf("a %T does not count its jobs", q)
	}
	cs, err := counter.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// slowEngine is a store whose every Dispatch takes delay and starts its
// job's handler once it returns.
type slowEngine struct {
	delay  time.Duration
	handle func(t int64)
}

func (e *slowEngine) DispatchMany(ctx context.Context, n int) (int, error) { return 0, nil }

func (e *slowEngine) Dispatch(ctx context.Context, t int64) error {
	time.Sleep(e.delay)
	e.handle(t)
	return nil
}

func (e *slowEngine) StartWorkers(o Options, handle func(t int64)) (func() error, error) {
	e.handle = handle
	return func() error { return nil }, nil
}

// The latency mode times a job from its tick, not from its Dispatch call:
// with one dispatcher taking 10 ms per call at 1,000 ticks a second, the
// ticks queue behind it, and their wait is the latency a user would see.
func TestLatencyCountsTheWaitForADispatcher(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := Options{Rate: 1000, LatencyDuration: 100 * time.Millisecond, Dispatchers: 1, Workers: 1, Concurrency: 1}
		figs, err := latency(t.Context(), &slowEngine{delay: 10 * time.Millisecond}, o)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range figs {
			got[f.Name] = f.Value
		}
		// Tick i (at i ms) is dispatched from 10*i ms and started at
		// 10*(i+1) ms: 9*i+10 ms later; the median of i in [0, 100) is 49.
		if p50, want := got["latency p50, dispatch to start @1000/s"], 9.0*49+10; p50 != want {
			t.Errorf("latency p50 = %v ms, want %v (each tick's wait for the one dispatcher counted)", p50, want)
		}
		if call := got["latency: the Dispatch call itself, p50 @1000/s"]; call != 10 {
			t.Errorf("the Dispatch call's own p50 = %v ms, want 10", call)
		}
	})
}

// With JobTime set, the burn-down's handlers each run that long: 20 jobs
// of 10ms on 2 handlers take 100ms of the bubble's clock.
func TestJobTimeKeepsHandlersBusy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var handled atomic.Int64
		work := Options{JobTime: 10 * time.Millisecond}.working(&handled)
		start := time.Now()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for range 10 {
					work(0)
				}
			})
		}
		wg.Wait()
		if el, n := time.Since(start), handled.Load(); el != 100*time.Millisecond || n != 20 {
			t.Fatalf("20 jobs of 10ms on 2 handlers: %d handled in %v, want 20 in 100ms", n, el)
		}
	})
}
