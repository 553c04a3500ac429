package balance

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Strategy is how a Worker shares its handlers among its queues.
type Strategy string

// The strategies (see the package documentation).
const (
	Strict   Strategy = "strict"   // the queues' order; the zero value means it too
	Weighted Strategy = "weighted" // asynq's weights
	Simple   Strategy = "simple"   // Horizon's even split of a budget
	Auto     Strategy = "auto"     // Horizon's automatic balance of a budget
)

// Measure is what Auto balances by.
type Measure string

// The measures of Auto.
const (
	// WaitTime balances by the age of each queue's oldest ready job
	// (Horizon's "time"). It needs a store with an Inspector
	// (OldestReady); on another store Auto balances by Backlog.
	WaitTime Measure = "time"
	// Backlog balances by how many jobs each queue has ready (Horizon's
	// "size"): the store's Inspector counts, or Len of each queue.
	Backlog Measure = "size"
)

// Defaults of Auto.
const (
	DefaultMaxShift = 1
	DefaultCooldown = 3 * time.Second
)

// ErrOptions reports Options that cannot be honoured; Worker.Run returns
// it, wrapped with what is wrong.
var ErrOptions = errors.New("balance: invalid options")

// Options configure Worker.Balance.
type Options struct {
	// Strategy is Strict when empty.
	Strategy Strategy
	// Weights are Weighted's weight of each queue, at least 1. They also
	// name the queues: a queue named here that the Worker's Queues leave
	// out is worked too, and when Queues was never set they are the
	// worker's queues (heaviest first). A queue of Queues not named here
	// weighs 1.
	Weights map[string]int
	// Max is the budget of Simple and Auto: the most handlers running,
	// and jobs reserved, across the queues at once. 0 means the Worker's
	// Concurrency; set, it replaces Concurrency.
	Max int
	// Min is the least allotment of each queue under Simple and Auto
	// (default 1; Min times the number of queues may not exceed Max).
	Min int
	// By is Auto's measure (default WaitTime).
	By Measure
	// MaxShift is how much Auto may change one queue's allotment per
	// cooldown (default DefaultMaxShift).
	MaxShift int
	// Cooldown is how often Auto rebalances (default DefaultCooldown).
	Cooldown time.Duration
}

// WithDefaults returns o with its zero fields set to their defaults;
// concurrency is the Worker's Concurrency, the budget when o.Max is 0.
func (o Options) WithDefaults(concurrency int) Options {
	if o.Strategy == "" {
		o.Strategy = Strict
	}
	if o.Max <= 0 {
		o.Max = concurrency
	}
	if o.Min <= 0 {
		o.Min = 1
	}
	if o.By == "" {
		o.By = WaitTime
	}
	if o.MaxShift <= 0 {
		o.MaxShift = DefaultMaxShift
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultCooldown
	}
	return o
}

// Budgeted reports whether the strategy shares a budget (Simple or Auto).
func (o Options) Budgeted() bool { return o.Strategy == Simple || o.Strategy == Auto }

// Check reports what is wrong with o (defaults applied) for a worker of
// the given queues, as an error matching ErrOptions.
func (o Options) Check(queues []string) error {
	switch o.Strategy {
	case Strict, Weighted, Simple, Auto:
	default:
		return fmt.Errorf("%w: unknown strategy %q", ErrOptions, o.Strategy)
	}
	for q, w := range o.Weights {
		if w < 1 {
			return fmt.Errorf("%w: queue %q weighs %d; weights are at least 1", ErrOptions, q, w)
		}
	}
	if o.By != WaitTime && o.By != Backlog {
		return fmt.Errorf("%w: unknown measure %q", ErrOptions, o.By)
	}
	if o.Budgeted() && o.Min*len(queues) > o.Max {
		return fmt.Errorf("%w: %d queues of at least %d handlers each need %d, over the budget of %d", ErrOptions, len(queues), o.Min, o.Min*len(queues), o.Max)
	}
	return nil
}

// Queues returns the queues a worker with o works, given its Queues
// (set: whether Queues was called): under Weighted, those and the
// weighted ones (only the weighted ones, heaviest first, when Queues was
// not called); otherwise queues as they are.
func (o Options) Queues(queues []string, set bool) []string {
	if o.Strategy != Weighted || len(o.Weights) == 0 {
		return queues
	}
	var out []string
	if set {
		out = slices.Clone(queues)
	}
	var extra []string
	for q := range o.Weights {
		if !slices.Contains(out, q) {
			extra = append(extra, q)
		}
	}
	slices.SortFunc(extra, func(a, b string) int {
		if d := o.Weights[b] - o.Weights[a]; d != 0 {
			return d
		}
		if a < b {
			return -1
		}
		return 1
	})
	return append(out, extra...)
}

// Even splits a budget of handlers among n queues as evenly as can be, the
// earlier queues taking the remainder.
func Even(n, budget int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = budget / n
		if i < budget%n {
			out[i]++
		}
	}
	return out
}

// Target returns the allotments Auto aims at for loads (one per queue,
// none negative): floor each, and the rest of the budget shared in proportion to
// the loads, largest remainders first. With no load anywhere it returns
// cur unchanged.
func Target(cur []int, load []float64, budget, floor int) []int {
	total := 0.0
	for _, l := range load {
		total += max0(l)
	}
	if total == 0 {
		return slices.Clone(cur)
	}
	n := len(load)
	spare := budget - floor*n
	out := make([]int, n)
	rem := make([]float64, n)
	given := 0
	for i, l := range load {
		share := float64(spare) * max0(l) / total
		out[i] = floor + int(share)
		rem[i] = share - float64(int(share))
		given += int(share)
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case rem[a] > rem[b]:
			return -1
		case rem[a] < rem[b]:
			return 1
		}
		return 0
	})
	for _, i := range order[:spare-given] {
		out[i]++
	}
	return out
}

func max0(f float64) float64 {
	if f > 0 {
		return f
	}
	return 0
}

// Shift moves cur towards target and returns the new allotments: each
// queue's allotment changes by at most maxShift, none falls below floor, and
// their sum never exceeds the budget (a queue grows only by handlers the budget
// has free or that shrinking queues give up, the largest shortfall
// first).
func Shift(cur, target []int, budget, floor, maxShift int) []int {
	out := slices.Clone(cur)
	free := budget
	for _, c := range cur {
		free -= c
	}
	for i := range out {
		if d := out[i] - target[i]; d > 0 {
			give := min(d, maxShift, out[i]-floor)
			if give > 0 {
				out[i] -= give
				free += give
			}
		}
	}
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return (target[b] - out[b]) - (target[a] - out[a]) })
	for _, i := range order {
		if free <= 0 {
			break
		}
		if d := target[i] - out[i]; d > 0 {
			take := min(d, maxShift, free)
			out[i] += take
			free -= take
		}
	}
	return out
}

// Picker is a smooth weighted round robin (nginx's): among the queues it
// is given, each pick takes the one furthest behind its share, so that in
// every run of picks as long as the sum of the weights, each queue is
// picked exactly its weight's number of times, spread out rather than in
// a block. It is not safe for concurrent use.
type Picker struct {
	weights []int
	current []int
	total   int
}

// NewPicker returns a Picker over weights (one per queue, at least 1).
func NewPicker(weights []int) *Picker {
	p := &Picker{weights: slices.Clone(weights), current: make([]int, len(weights))}
	for _, w := range weights {
		p.total += w
	}
	return p
}

// Next returns the index of the next queue picked.
func (p *Picker) Next() int {
	best := 0
	for i, w := range p.weights {
		p.current[i] += w
		if p.current[i] > p.current[best] {
			best = i
		}
	}
	p.current[best] -= p.total
	return best
}

// Split returns how many of n picks fall on each queue.
func (p *Picker) Split(n int) []int {
	out := make([]int, len(p.weights))
	for range n {
		out[p.Next()]++
	}
	return out
}
