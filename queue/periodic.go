package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/robfig/cron/v3"
)

// Schedule says when a periodic job's ticks fall. Next must be
// deterministic (every process computes the same ticks) and return a time
// after t.
type Schedule interface {
	Next(t time.Time) time.Time
	// String describes the schedule for people (the dashboard, the CLI).
	String() string
}

// Every ticks every d, at the multiples of d since the zero time (so every
// process computes the same ticks: Every(time.Hour) ticks on the hour). d
// must be at least a second.
func Every(d time.Duration) Schedule { return every{d: d} }

type every struct{ d time.Duration }

func (e every) Next(t time.Time) time.Time { return t.Truncate(e.d).Add(e.d) }
func (e every) String() string             { return "every " + e.d.String() }

// prev returns the last tick at or before t.
func (e every) prev(t time.Time) time.Time { return t.Truncate(e.d) }

func (e every) validate() error {
	if e.d < time.Second {
		return fmt.Errorf("Every(%s): the interval must be at least a second", e.d)
	}
	return nil
}

// CronSchedule is a cron expression's schedule (see Cron).
type CronSchedule struct {
	expr  string
	sched cron.Schedule
	loc   *time.Location
	err   error
}

// Cron parses a standard five-field cron expression ("0 3 * * *": minute,
// hour, day of month, month, day of week) or a descriptor (@hourly, @daily,
// @every 1h30m), as github.com/robfig/cron/v3 does. Ticks fall in the time
// zone set by In (default UTC) or by a CRON_TZ= prefix. An expression that
// does not parse makes Periodic fail with the parser's error.
func Cron(expr string) *CronSchedule {
	s, err := parseCron(expr)
	return &CronSchedule{expr: expr, sched: s, loc: time.UTC, err: err}
}

// parseCron is cron.ParseStandard, with the parser's panics on some
// malformed input (a bare "TZ=" prefix, found by FuzzCron) returned as
// errors: a schedule read from configuration must not crash the process.
func parseCron(expr string) (s cron.Schedule, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("cannot parse cron expression %q: %v", expr, p)
		}
	}()
	return cron.ParseStandard(expr)
}

// In returns the schedule with its ticks in loc.
func (c *CronSchedule) In(loc *time.Location) *CronSchedule {
	cp := *c
	cp.loc = loc
	return &cp
}

// Next returns the first tick after t.
func (c *CronSchedule) Next(t time.Time) time.Time {
	if c.err != nil {
		return time.Time{}
	}
	return c.sched.Next(t.In(c.loc))
}

func (c *CronSchedule) String() string {
	if c.loc == time.UTC {
		return c.expr
	}
	return c.expr + " (" + c.loc.String() + ")"
}

func (c *CronSchedule) validate() error {
	if c.err != nil {
		return fmt.Errorf("Cron(%q): %w", c.expr, c.err)
	}
	return nil
}

// missed wraps a Schedule with the run-missed-on-start rule.
type missed struct{ Schedule }

func (m missed) validate() error { return validateSchedule(m.Schedule) }

// RunMissed makes a periodic job catch up once on start: when a worker
// starts and one or more ticks passed since the last recorded one (the
// workers were down), exactly one job is enqueued for the latest of them.
// Without it, ticks missed during downtime are skipped, as Laravel's
// scheduler and River's periodic jobs skip them.
func RunMissed(s Schedule) Schedule { return missed{s} }

func validateSchedule(s Schedule) error {
	if v, ok := s.(interface{ validate() error }); ok {
		return v.validate()
	}
	if s == nil {
		return errors.New("no schedule")
	}
	return nil
}

// periodic is one registration of Periodic.
type periodic struct {
	name    string
	sched   Schedule
	catchUp bool
	build   func() (Job, error)
}

// Periodic registers a periodic job on w: while w runs, a job built from v
// and opts (as Dispatch builds it) is enqueued at each tick of s. Each tick
// is enqueued exactly once however many workers, in however many
// processes, register the same name over one store: the store records the
// last tick per name (see Scheduler). Ticks missed while no worker ran
// are skipped unless s is wrapped in RunMissed. The job runs like any other
// (on whichever worker serves its queue); a tick whose job is still waiting
// is not skipped unless opts make the job unique.
//
// Periodic returns an error matching ErrConfig for an empty or registered
// name, a name beyond the limits of a job name (MaxKeyBytes of UTF-8 without
// NUL, the same on every driver) or an invalid schedule, and one matching ErrUnsupported when w's
// queue cannot record ticks. Register periodic jobs before Run.
func Periodic[T any](w *Worker, name string, s Schedule, v T, opts ...Option) error {
	if err := driver.CapabilitiesOf(w.q).Require("Scheduler"); err != nil {
		return fmt.Errorf("queue: periodic job %q: %w", name, err)
	}
	if err := validateSchedule(s); err != nil {
		return fmt.Errorf("%w: periodic job %q: %w", ErrConfig, name, err)
	}
	if name == "" {
		return fmt.Errorf("%w: periodic job: the name is empty", ErrConfig)
	}
	if ve := (*driver.ValidationError)(nil); errors.As(driver.Validate(Job{Name: name}), &ve) {
		return fmt.Errorf("%w: periodic job name must be %s, got %s", ErrConfig, ve.Limit, ve.Got)
	}
	if _, err := NewJob(v, opts...); err != nil {
		return fmt.Errorf("%w: periodic job %q: %w", ErrConfig, name, err)
	}
	p := &periodic{name: name, sched: s, build: func() (Job, error) { return NewJob(v, opts...) }}
	if m, ok := s.(missed); ok {
		p.sched, p.catchUp = m.Schedule, true
	}
	for _, o := range w.periodics {
		if o.name == name {
			return fmt.Errorf("%w: periodic job %q is already registered", ErrConfig, name)
		}
	}
	w.periodics = append(w.periodics, p)
	return nil
}

// lastTick returns the last tick of s at or before now, given that none
// falls in (from, now] when it returns from; it is zero when from is zero.
func lastTick(s Schedule, from, now time.Time) time.Time {
	if e, ok := s.(every); ok {
		return e.prev(now)
	}
	if from.IsZero() {
		return time.Time{}
	}
	// A dense schedule after a long stop: look back at most a year. With
	// no tick found in that year the answer is from (nothing missed), never
	// the start of the look-back, which is no tick of s (FuzzCron found
	// that with @every longer than a year).
	last := from
	for t := s.Next(later(from, now.AddDate(-1, 0, 0))); !t.IsZero() && !t.After(now); t = s.Next(t) {
		last = t
	}
	return last
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// schedule runs p until ctx is done: it enqueues each tick as it falls
// (and, with RunMissed, the latest missed tick once at start).
func (p *periodic) schedule(ctx context.Context, store driver.Scheduler, log func(msg string, args ...any)) {
	now := time.Now()
	// The record keeps the job a tick enqueues, so that a tool without its
	// Go type can run it by hand (driver.RunPeriodic).
	var tpl []byte
	if j, err := p.build(); err == nil {
		if tpl, err = driver.EncodePeriodicTemplate(j); err != nil {
			log("queue: a periodic job's template is not kept; it cannot be run by hand", "periodic", p.name, "err", err)
		}
	}
	var last time.Time
	for {
		var err error
		last, err = store.RegisterPeriodic(ctx, driver.PeriodicInfo{Name: p.name, Schedule: p.sched.String(), LastTick: now, NextTick: p.sched.Next(now), Template: tpl})
		if err == nil {
			break
		}
		log("queue: registering a periodic job failed; retrying", "periodic", p.name, "err", err)
		if !sleepCtx(ctx, time.Second) {
			return
		}
	}
	if p.catchUp {
		if t := lastTick(p.sched, last, now); t.After(last) {
			p.tick(ctx, store, t, log)
		}
	}
	for {
		next := p.sched.Next(time.Now())
		if next.IsZero() || !sleepCtx(ctx, time.Until(next)) {
			return
		}
		p.tick(ctx, store, next, log)
	}
}

// tick claims the tick at t, retrying a failing store until the next tick
// is due.
func (p *periodic) tick(ctx context.Context, store driver.Scheduler, t time.Time, log func(msg string, args ...any)) {
	j, err := p.build()
	if err != nil {
		log("queue: building a periodic job failed; tick skipped", "periodic", p.name, "tick", t, "err", err)
		return
	}
	j.Meta = withMeta(j.Meta, MetaPeriodic, p.name)
	j.Meta[MetaPeriodicTick] = t.UTC().Format(time.RFC3339Nano)
	info := driver.PeriodicInfo{Name: p.name, Schedule: p.sched.String(), LastTick: t, NextTick: p.sched.Next(t), LastJobID: j.ID}
	for {
		_, err := store.ClaimTick(ctx, info, j)
		if err == nil || ctx.Err() != nil {
			return
		}
		log("queue: enqueueing a periodic job failed; retrying", "periodic", p.name, "tick", t, "err", err)
		if time.Now().After(info.NextTick) || !sleepCtx(ctx, time.Second) {
			return
		}
	}
}

func withMeta(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = make(map[string]string, 1)
	}
	m[k] = v
	return m
}

// sleepCtx sleeps d and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
