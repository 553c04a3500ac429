package alert

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/internal/storestats"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Kind is what an alert measures.
type Kind string

// The kinds of alerts.
const (
	KindWait        Kind = "wait"         // the oldest ready job's wait
	KindFailureRate Kind = "failure_rate" // failed attempts / all attempts in the stats window
)

// Threshold sets the limits of one queue, or of every queue when Queue is
// empty (a threshold naming a queue overrides the catch-all for it). A
// zero limit is not checked.
type Threshold struct {
	Queue string
	// MaxWait fires when the oldest ready job has waited longer.
	MaxWait time.Duration
	// MaxFailureRate (0 to 1) fires when more of the window's attempts
	// failed, once at least MinRuns attempts were made (10 when zero).
	MaxFailureRate float64
	MinRuns        int64
}

// Alert is one alert's state change, or its current state in Firing.
type Alert struct {
	Queue  string
	Kind   Kind
	Firing bool // true: crossed; false: cleared
	// Value is the measurement: seconds of wait, or the failure rate.
	Value float64
	// Limit is the threshold's limit in the same unit.
	Limit float64
	At    time.Time
}

// Text describes the alert in one line, as the webhook sends it.
func (a Alert) Text() string {
	state := "cleared"
	if a.Firing {
		state = "crossed"
	}
	switch a.Kind {
	case KindWait:
		return fmt.Sprintf("Meridian: queue %s long wait %s: the oldest ready job has waited %s (limit %s)", a.Queue, state,
			time.Duration(a.Value*float64(time.Second)).Round(time.Second), time.Duration(a.Limit*float64(time.Second)))
	default:
		return fmt.Sprintf("Meridian: queue %s failure rate %s: %.1f%% of recent attempts failed (limit %.1f%%)", a.Queue, state, a.Value*100, a.Limit*100)
	}
}

// Hook is called once per transition. It runs on the Check's goroutine:
// keep it short or hand off.
type Hook func(ctx context.Context, a Alert) error

// Option configures New.
type Option func(*Alerter)

// WithThresholds sets the thresholds.
func WithThresholds(ts ...Threshold) Option { return func(a *Alerter) { a.thresholds = ts } }

// WithInterval sets how often Run checks (default 30 s).
func WithInterval(d time.Duration) Option { return func(a *Alerter) { a.interval = d } }

// WithLeader makes only the process for which isLeader reports true claim
// transitions and call the hook; the others still evaluate for Firing.
func WithLeader(isLeader func(ctx context.Context) bool) Option {
	return func(a *Alerter) { a.isLeader = isLeader }
}

// WithElection makes only the process that l elected claim transitions and
// call the hook, as WithLeader(l.IsLeader) does, and fences its claims:
// each Check claims under l's current Fence (driver.WithFence), which a
// SQLClaimer made with FencedBy checks in the claim's own statement, so a
// leader that paused and resumed after another took over claims nothing.
func WithElection(l *queue.Leader) Option {
	return func(a *Alerter) {
		a.fence = l.Fence
		a.isLeader = func(context.Context) bool { return l.IsLeader() }
	}
}

// WithClaimer sets who decides which process calls the hook for a
// transition (default: NewMemoryClaimer, one process only).
func WithClaimer(c Claimer) Option { return func(a *Alerter) { a.claimer = c } }

// WithLogger sets the logger for failed checks and hooks (default
// slog.Default).
func WithLogger(l *slog.Logger) Option { return func(a *Alerter) { a.log = l } }

// Alerter evaluates thresholds and calls a hook on transitions.
type Alerter struct {
	in         driver.Inspector
	hook       Hook
	thresholds []Threshold
	interval   time.Duration
	isLeader   func(context.Context) bool
	fence      func() (driver.Fence, bool) // WithElection's, or nil
	claimer    Claimer
	log        *slog.Logger

	mu      sync.Mutex
	view    map[string]Alert // latest evaluation, by key
	claimed map[string]bool  // the state this process last settled with the claimer
}

// New returns an Alerter over in (usually the Queue) that calls hook.
func New(in driver.Inspector, hook Hook, opts ...Option) *Alerter {
	a := &Alerter{in: in, hook: hook, interval: 30 * time.Second, log: slog.Default(),
		view: make(map[string]Alert), claimed: make(map[string]bool)}
	for _, o := range opts {
		o(a)
	}
	if a.claimer == nil {
		a.claimer = NewMemoryClaimer()
	}
	return a
}

// Run checks every interval until ctx is done, logging failed checks, and
// returns ctx's error.
func (a *Alerter) Run(ctx context.Context) error {
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		if err := a.Check(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("alert: checking queues", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// thresholdFor returns the threshold that applies to queue.
func (a *Alerter) thresholdFor(q string) (Threshold, bool) {
	var all *Threshold
	for i, t := range a.thresholds {
		if t.Queue == q {
			return t, true
		}
		if t.Queue == "" {
			all = &a.thresholds[i]
		}
	}
	if all != nil {
		return *all, true
	}
	return Threshold{}, false
}

// Check reads the store once, updates Firing, and for each alert whose
// state changed claims the transition and, if this process won it, calls
// the hook. A failed claim is retried at the next Check.
func (a *Alerter) Check(ctx context.Context) error {
	snap, err := storestats.Read(ctx, a.in)
	if err != nil {
		return fmt.Errorf("alert: %w", err)
	}
	var evals []Alert
	for _, st := range snap.Stats {
		t, ok := a.thresholdFor(st.Queue)
		if !ok {
			continue
		}
		if t.MaxWait > 0 {
			v := snap.OldestAge(st.Queue)
			evals = append(evals, Alert{Queue: st.Queue, Kind: KindWait, Firing: v > t.MaxWait,
				Value: v.Seconds(), Limit: t.MaxWait.Seconds(), At: snap.At})
		}
		if t.MaxFailureRate > 0 {
			runs := st.Processed + st.Failed
			rate := 0.0
			if runs > 0 {
				rate = float64(st.Failed) / float64(runs)
			}
			minRuns := cmp.Or(t.MinRuns, 10)
			evals = append(evals, Alert{Queue: st.Queue, Kind: KindFailureRate, Firing: runs >= minRuns && rate > t.MaxFailureRate,
				Value: rate, Limit: t.MaxFailureRate, At: snap.At})
		}
	}
	// Queues that disappeared from the stats have nothing waiting and no
	// recent attempts: their alerts clear.
	a.mu.Lock()
	seen := make(map[string]bool, len(evals))
	for _, e := range evals {
		seen[key(e.Queue, e.Kind)] = true
	}
	for k, v := range a.view {
		if !seen[k] && v.Firing {
			evals = append(evals, Alert{Queue: v.Queue, Kind: v.Kind, Limit: v.Limit, At: snap.At})
		}
	}
	for _, e := range evals {
		a.view[key(e.Queue, e.Kind)] = e
	}
	a.mu.Unlock()

	if a.fence != nil {
		f, ok := a.fence()
		if !ok {
			return nil
		}
		ctx = driver.WithFence(ctx, f)
	}
	if a.isLeader != nil && !a.isLeader(ctx) {
		return nil
	}
	var errs []error
	for _, e := range evals {
		k := key(e.Queue, e.Kind)
		a.mu.Lock()
		prev, known := a.claimed[k]
		a.mu.Unlock()
		if known && prev == e.Firing {
			continue
		}
		// With no state known (a fresh process), the claimer decides: a
		// clear wins only if the cluster had the alert firing.
		won, err := a.claimer.Claim(ctx, k, e.Firing)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.mu.Lock()
		a.claimed[k] = e.Firing
		a.mu.Unlock()
		if won {
			if err := a.hook(ctx, e); err != nil {
				a.log.Error("alert: hook failed; the transition is not retried", "queue", e.Queue, "kind", e.Kind, "firing", e.Firing, "err", err)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// Firing returns the alerts firing at the last Check, by queue then kind:
// what a dashboard highlights.
func (a *Alerter) Firing() []Alert {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Alert
	for _, v := range a.view {
		if v.Firing {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(x, y Alert) int {
		return cmp.Or(cmp.Compare(x.Queue, y.Queue), cmp.Compare(x.Kind, y.Kind))
	})
	return out
}

// key names an alert: its kind, a colon, its queue (kinds have no colon).
func key(q string, k Kind) string { return string(k) + ":" + q }
