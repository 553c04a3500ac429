package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

func init() {
	commands["jobs"] = command{
		summary: "list jobs by state, show one job, cancel, retry or run jobs now",
		main:    jobsMain,
	}
}

// jobJSON is one job in the --json output of `meridian jobs` and `meridian
// failed list`.
type jobJSON struct {
	ID          string            `json:"id"`
	Queue       string            `json:"queue"`
	Name        string            `json:"name"`
	State       driver.JobState   `json:"state"`
	Priority    int               `json:"priority"`
	Attempts    int               `json:"attempts"`
	MaxAttempts int               `json:"max_attempts,omitempty"`
	UniqueKey   string            `json:"unique_key,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	AvailableAt *time.Time        `json:"available_at,omitempty"`
	UpdatedAt   *time.Time        `json:"updated_at,omitempty"`
	FinishedAt  *time.Time        `json:"finished_at,omitempty"`
	LastError   string            `json:"last_error,omitempty"`
	// Actions are what operators changed (jobs show only).
	Actions []actionJSON `json:"actions,omitempty"`
	// Payload is the job's payload as stored: JSON for jobs made by
	// Dispatch, shown as a string so that any bytes survive.
	Payload string `json:"payload"`
}

// actionJSON is one operator action on a job, as jobs show --json prints it.
type actionJSON struct {
	At   time.Time `json:"at"`
	By   string    `json:"by"`
	What string    `json:"what"`
}

func newJobJSON(j driver.JobInfo) jobJSON {
	var acts []actionJSON
	for _, a := range j.Actions {
		acts = append(acts, actionJSON{At: a.At.UTC(), By: a.By, What: a.What})
	}
	return jobJSON{Actions: acts,
		ID: j.ID, Queue: j.QueueName(), Name: j.Name, State: j.State,
		Priority: j.Priority, Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		UniqueKey: j.UniqueKey, Tags: j.Tags, Meta: j.Meta,
		CreatedAt: j.CreatedAt, AvailableAt: optTime(j.AvailableAt), UpdatedAt: optTime(j.UpdatedAt), FinishedAt: optTime(j.FinishedAt),
		LastError: j.LastError, Payload: string(j.Payload),
	}
}

func jobsMain(ctx context.Context, args []string, s stdio) error {
	out, errOut := s.out, s.errOut
	states := make([]string, len(driver.JobStates))
	for i, s := range driver.JobStates {
		states[i] = string(s)
	}
	fs, dsn := newFlags("jobs", "list [--state STATE] [--queue NAME] [--name NAME] [--tag TAG] [--search QUERY] [--limit N] [--json] | show ID [--json] | cancel ID... | retry ID... [--payload JSON | --payload-file FILE] | run-now ID... | clone ID...  [--dsn URL]", errOut)
	state := fs.String("state", string(queue.StateReady), "list: jobs in this state: "+strings.Join(states, ", "))
	queueName := fs.String("queue", "", "list: only this queue")
	name := fs.String("name", "", "list: only jobs of this name (job type)")
	tag := fs.String("tag", "", "list: only jobs with this tag")
	limit := fs.Int("limit", 50, "list: how many to list (the driver caps it, at 500 for the SQL drivers)")
	search := fs.String("search", "", `list: only jobs whose payload holds this text, or passes field filters: 'payload.user_id = 42 AND payload.vip = true'`)
	searchTime := fs.Duration("search-time", 30*time.Second, "list: how long a --search goes on looking before it prints what it found")
	asJSON := fs.Bool("json", false, "print JSON: one object per job")
	payloadText := fs.String("payload", "", "retry: the new payload (one JSON value), for one job")
	payloadFile := fs.String("payload-file", "", "retry: read the new payload from this file (- for standard input)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usagef("name an action: list, show, cancel, retry, run-now or clone")
	}
	var payload []byte
	switch {
	case pos[0] == "retry" && len(pos) >= 2:
		if payload, err = readPayload(*payloadText, *payloadFile, s.in); err != nil {
			return err
		}
		if payload != nil && len(pos) > 2 {
			return usagef("--payload replaces one job's payload: name one job")
		}
	case (pos[0] == "run-now" || pos[0] == "clone") && len(pos) >= 2:
	case pos[0] == "retry" || pos[0] == "run-now" || pos[0] == "clone":
		return usagef("usage: meridian jobs %s ID...", pos[0])
	case pos[0] == "list" && len(pos) == 1:
		if !strings.Contains(","+strings.Join(states, ",")+",", ","+*state+",") {
			return usagef("unknown --state %q: %s", *state, strings.Join(states, ", "))
		}
		if _, err := driver.ParseSearch(*search); err != nil {
			return usagef("--search %q: %v", *search, strings.TrimPrefix(err.Error(), "queue: "))
		}
	case pos[0] == "show" && len(pos) == 2:
	case pos[0] == "cancel" && len(pos) >= 2:
	case pos[0] == "list" || pos[0] == "show" || pos[0] == "cancel":
		return usagef("usage: meridian jobs list, meridian jobs show ID, or meridian jobs cancel ID...")
	default:
		fs.Usage()
		return usagef("unknown action %q: list, show, cancel, retry, run-now or clone", pos[0])
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	switch pos[0] {
	case "cancel":
		return cancelJobs(ctx, q, pos[1:], out)
	case "retry":
		return amendJobs(ctx, q, driver.AmendRetry, pos[1:], payload, out)
	case "run-now":
		return amendJobs(ctx, q, driver.AmendRunNow, pos[1:], nil, out)
	case "clone":
		return cloneJobs(ctx, q, pos[1:], out)
	}
	caps := driver.CapabilitiesOf(q)
	insp := caps.Inspector
	if insp == nil {
		return caps.Require("Inspector")
	}
	if pos[0] == "show" {
		j, err := insp.GetJob(ctx, pos[1])
		if errors.Is(err, queue.ErrNotFound) {
			return fmt.Errorf("no job %s: %w", pos[1], err)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(out, newJobJSON(j))
		}
		return printJob(out, j)
	}
	page, err := listJobs(ctx, insp, driver.JobFilter{State: driver.JobState(*state), Queue: *queueName, Name: *name, Tag: *tag, Search: *search, Limit: *limit}, *searchTime, errOut)
	if err != nil {
		return err
	}
	if *asJSON {
		rows := make([]jobJSON, 0, len(page.Jobs))
		for _, j := range page.Jobs {
			rows = append(rows, newJobJSON(j))
		}
		return writeJSON(out, rows)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tqueue\tname\tattempts\tcreated\terror")
	for _, j := range page.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.QueueName(), j.Name, j.Attempts,
			j.CreatedAt.UTC().Format(time.RFC3339), firstLine(j.LastError, 80))
	}
	return tw.Flush()
}

// listJobs lists one page of f. A search that the store stops at its
// bound (rows or time) before the page is full goes on from where it
// stopped until the page is full, the jobs end or budget has passed;
// then it says on errOut how many jobs it examined without reaching the
// end, so an empty list is never taken for "no match".
func listJobs(ctx context.Context, insp driver.Inspector, f driver.JobFilter, budget time.Duration, errOut io.Writer) (driver.JobPage, error) {
	page, err := insp.ListJobs(ctx, f)
	if err != nil || f.Search == "" {
		return page, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	end := time.Now().Add(budget)
	examined := page.Scanned
	for page.Scanned > 0 && page.Next != "" && len(page.Jobs) < limit && time.Now().Before(end) {
		next := f
		next.After, next.Limit = page.Next, limit-len(page.Jobs)
		more, err := insp.ListJobs(ctx, next)
		if err != nil {
			return page, err
		}
		page.Jobs = append(page.Jobs, more.Jobs...)
		page.Next, page.Scanned = more.Next, more.Scanned
		examined += more.Scanned
	}
	if page.Scanned > 0 && page.Next != "" && len(page.Jobs) < limit {
		fmt.Fprintf(errOut, "meridian: the search examined %d jobs in %v and stopped before the end (--search-time); these are the matches among them\n", examined, budget)
	}
	return page, nil
}

// printJob writes one job's fields, one per line.
func printJob(out io.Writer, j driver.JobInfo) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	row("id", j.ID)
	row("queue", j.QueueName())
	row("name", j.Name)
	row("state", j.State)
	row("priority", j.Priority)
	row("attempts", j.Attempts)
	if j.MaxAttempts > 0 {
		row("max attempts", j.MaxAttempts)
	}
	if j.UniqueKey != "" {
		row("unique key", j.UniqueKey)
	}
	if len(j.Tags) > 0 {
		row("tags", strings.Join(j.Tags, ", "))
	}
	row("created", timeOrDash(j.CreatedAt))
	row("available", timeOrDash(j.AvailableAt))
	row("updated", timeOrDash(j.UpdatedAt))
	row("finished", timeOrDash(j.FinishedAt))
	row("payload", string(j.Payload))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(j.Actions) > 0 {
		fmt.Fprintln(out, "actions:")
		for _, a := range j.Actions {
			by := a.By
			if by == "" {
				by = "unknown"
			}
			fmt.Fprintf(out, "  %s  %s: %s\n", a.At.UTC().Format(time.RFC3339), by, a.What)
		}
	}
	if j.LastError != "" {
		_, err := fmt.Fprintf(out, "last error:\n%s\n", j.LastError)
		return err
	}
	return nil
}
