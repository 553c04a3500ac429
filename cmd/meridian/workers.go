package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// The fleet commands: list the workers, and terminate, pause or continue
// every worker of the store, or one, through the store (driver.Fleet), so
// that the command reaches the workers on every host.

func init() {
	commands["workers"] = command{
		summary: "list the workers, or terminate, pause or continue every worker (or one) through the store",
		main: func(ctx context.Context, args []string, s stdio) error {
			return workersMain(ctx, args, s.out, s.errOut)
		},
	}
}

// workersMain runs `meridian workers list|terminate|pause|continue [ID]`.
func workersMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs, dsn := newFlags("workers", "list [--json] | terminate [ID] | pause [ID] | continue [ID]  [--dsn URL]", errOut)
	asJSON := fs.Bool("json", false, "list: print JSON objects, one per line")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		pos = []string{"list"}
	}
	verb, rest := pos[0], pos[1:]
	cmd := driver.WorkerCommand(verb)
	switch {
	case verb == "list" && len(rest) == 0:
	case cmd.Valid() && len(rest) <= 1:
	default:
		fs.Usage()
		return usagef("want list, or terminate, pause or continue with at most one worker ID")
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	caps := driver.CapabilitiesOf(q)
	if verb == "list" {
		return listWorkers(ctx, caps, *asJSON, out)
	}
	if caps.Fleet == nil {
		return caps.Require("Fleet")
	}
	id := ""
	if len(rest) == 1 {
		id = rest[0]
		if caps.Inspector != nil {
			ws, err := caps.Inspector.Workers(ctx)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(ws, func(w driver.WorkerInfo) bool { return w.ID == id }) {
				return fmt.Errorf("no worker %s in the registry (see meridian workers list)", id)
			}
		}
	}
	if err := caps.Fleet.CommandWorkers(ctx, id, cmd); err != nil {
		return err
	}
	who := "every worker"
	if id != "" {
		who = "worker " + id
	}
	switch cmd {
	case driver.CommandTerminate:
		fmt.Fprintf(out, "told %s to terminate: running jobs finish, then Run returns queue.ErrTerminated\n", who)
	case driver.CommandPause:
		fmt.Fprintf(out, "paused %s: no new jobs until continued\n", who)
	default:
		fmt.Fprintf(out, "continued %s\n", who)
	}
	return nil
}

// workerLine is one worker of `meridian workers list --json`.
type workerLine struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Queues      []string  `json:"queues"`
	Concurrency int       `json:"concurrency"`
	Running     int       `json:"running"`
	Paused      bool      `json:"paused"`
	StartedAt   time.Time `json:"started_at"`
	LastSeen    time.Time `json:"last_seen"`
}

// listWorkers prints the worker registry with each worker's pause.
func listWorkers(ctx context.Context, caps driver.Capabilities, asJSON bool, out io.Writer) error {
	if caps.Inspector == nil {
		return caps.Require("Inspector")
	}
	ws, err := caps.Inspector.Workers(ctx)
	if err != nil {
		return err
	}
	var fleetPaused bool
	var paused []string
	if caps.Fleet != nil {
		if fleetPaused, paused, err = caps.Fleet.PausedWorkers(ctx); err != nil {
			return err
		}
	}
	lines := make([]workerLine, len(ws))
	for i, w := range ws {
		running := 0
		for _, n := range w.Running {
			running += n
		}
		lines[i] = workerLine{ID: w.ID, Host: w.Host, PID: w.PID, Queues: w.Queues, Concurrency: w.Concurrency, Running: running,
			Paused: fleetPaused || slices.Contains(paused, w.ID), StartedAt: w.StartedAt, LastSeen: w.LastSeen}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return nil
	}
	if fleetPaused {
		fmt.Fprintln(out, "the fleet is paused: meridian workers continue resumes it")
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tPID\tQUEUES\tCONCURRENCY\tRUNNING\tSTATE\tLAST SEEN")
	for _, l := range lines {
		state := "working"
		if l.Paused {
			state = "paused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\n", l.ID, l.Host, l.PID, strings.Join(l.Queues, ","),
			l.Concurrency, l.Running, state, l.LastSeen.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}
