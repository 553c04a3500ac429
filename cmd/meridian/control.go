package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The commands that steer work already in the store: pause and resume a
// queue, cancel jobs, and list, pause, resume and run periodic jobs.

func init() {
	commands["pause"] = command{
		summary: "pause a queue: workers stop taking its jobs until it is resumed",
		main: func(ctx context.Context, args []string, s stdio) error {
			return pauseMain(ctx, "pause", args, s.out, s.errOut)
		},
	}
	commands["resume"] = command{
		summary: "resume a paused queue",
		main: func(ctx context.Context, args []string, s stdio) error {
			return pauseMain(ctx, "resume", args, s.out, s.errOut)
		},
	}
	commands["periodic"] = command{
		summary: "list periodic jobs (schedule, last and next tick, last job's state), pause, resume or run one now",
		main: func(ctx context.Context, args []string, s stdio) error {
			return periodicMain(ctx, args, s.out, s.errOut)
		},
	}
}

// pauseMain runs `meridian pause QUEUE...` and `meridian resume QUEUE...`.
func pauseMain(ctx context.Context, verb string, args []string, out, errOut io.Writer) error {
	fs, dsn := newFlags(verb, "QUEUE... [--dsn URL]", errOut)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usagef("name at least one queue")
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	caps := driver.CapabilitiesOf(q)
	p := caps.Controller
	if p == nil {
		return caps.Require("Controller")
	}
	do, done := p.Pause, "paused"
	if verb == "resume" {
		do, done = p.Resume, "resumed"
	}
	var failed []error
	for _, name := range pos {
		if err := do(ctx, name); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", name, err))
			continue
		}
		fmt.Fprintf(out, "%s queue %s\n", done, name)
	}
	return errors.Join(failed...)
}

// cancelJobs runs `meridian jobs cancel ID...`: each job that had not
// finished is cancelled; the others are reported and make the exit code 1.
func cancelJobs(ctx context.Context, q queue.Queue, ids []string, out io.Writer) error {
	var failed []error
	for _, id := range ids {
		was, err := queue.CancelJob(ctx, q, id)
		switch {
		case errors.Is(err, queue.ErrUnsupported):
			return err
		case errors.Is(err, queue.ErrNotFound):
			failed = append(failed, fmt.Errorf("%s: no such job", id))
		case errors.Is(err, queue.ErrFinished):
			failed = append(failed, fmt.Errorf("%s: already finished; nothing to cancel", id))
		case err != nil:
			failed = append(failed, fmt.Errorf("%s: %w", id, err))
		case was == queue.StateRunning:
			fmt.Fprintf(out, "cancelled %s (running: its handler is stopped within the workers' cancel poll)\n", id)
		default:
			fmt.Fprintf(out, "cancelled %s (was %s)\n", id, was)
		}
	}
	return errors.Join(failed...)
}

// periodicJSON is one periodic job in `meridian periodic list --json`.
type periodicJSON struct {
	Name      string          `json:"name"`
	Schedule  string          `json:"schedule"`
	LastTick  *time.Time      `json:"last_tick,omitempty"`
	NextTick  *time.Time      `json:"next_tick,omitempty"`
	LastJobID string          `json:"last_job_id,omitempty"`
	LastState driver.JobState `json:"last_job_state,omitempty"`
	Paused    bool            `json:"paused"`
}

func periodicMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs, dsn := newFlags("periodic", "list [--json] | pause NAME | resume NAME | run NAME  [--dsn URL]", errOut)
	asJSON := fs.Bool("json", false, "list: print JSON, one object per periodic job")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 1 && pos[0] == "list":
	case len(pos) == 2 && (pos[0] == "pause" || pos[0] == "resume" || pos[0] == "run"):
	default:
		fs.Usage()
		return usagef("name an action: list, or pause, resume or run with the periodic job's name")
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	caps := driver.CapabilitiesOf(q)
	ps := caps.Scheduler
	if ps == nil {
		return caps.Require("Scheduler")
	}
	switch pos[0] {
	case "pause", "resume":
		if err := ps.PausePeriodic(ctx, pos[1], pos[0] == "pause"); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "%sd periodic job %s\n", pos[0], pos[1])
		return err
	case "run":
		j, err := driver.RunPeriodic(ctx, q, pos[1])
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "ran periodic job %s now: job %s on queue %s\n", pos[1], j.ID, j.QueueName())
		return err
	}
	list, err := ps.Periodics(ctx)
	if err != nil {
		return err
	}
	insp := caps.Inspector
	rows := make([]periodicJSON, 0, len(list))
	for _, p := range list {
		r := periodicJSON{Name: p.Name, Schedule: p.Schedule, LastJobID: p.LastJobID, Paused: p.Paused}
		if !p.LastTick.IsZero() {
			r.LastTick = &p.LastTick
		}
		if !p.NextTick.IsZero() {
			r.NextTick = &p.NextTick
		}
		if insp != nil && p.LastJobID != "" {
			// The last job may be gone already (retention): leave its
			// state out rather than fail the listing.
			if j, err := insp.GetJob(ctx, p.LastJobID); err == nil {
				r.LastState = j.State
			} else if !errors.Is(err, queue.ErrNotFound) {
				return err
			}
		}
		rows = append(rows, r)
	}
	if *asJSON {
		return writeJSON(out, rows)
	}
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	or := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tschedule\tlast tick\tnext tick\tlast job\tstate")
	for _, r := range rows {
		next := at(r.NextTick)
		if r.Paused {
			next = "paused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Schedule, at(r.LastTick), next, or(r.LastJobID, "-"), or(string(r.LastState), "-"))
	}
	return tw.Flush()
}
