package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// The operator's commands: print the DDL, create the tables, read the
// figures, and handle dead letters from a shell.

func init() {
	commands["schema"] = command{
		summary: "print the SQL of every schema migration, for your migration tool",
		main: func(ctx context.Context, args []string, s stdio) error {
			return schemaMain(args, s.out, s.errOut)
		},
	}
	commands["migrate"] = command{
		summary: "create the queue's tables or bring them to this release's schema, or back (--to, --down)",
		main: func(ctx context.Context, args []string, s stdio) error {
			return migrateMain(ctx, args, s)
		},
	}
	commands["stats"] = command{
		summary: "print per-queue figures: ready, scheduled, running, dead, throughput",
		main: func(ctx context.Context, args []string, s stdio) error {
			return statsMain(ctx, args, s.out, s.errOut)
		},
	}
	commands["failed"] = command{
		summary: "list, retry, forget or flush dead letters",
		main: func(ctx context.Context, args []string, s stdio) error {
			return failedMain(ctx, args, s)
		},
	}
	commands["purge"] = command{
		summary: "delete the waiting (ready and scheduled) jobs of a queue or of all queues",
		main:    purgeMain,
	}
}

func schemaMain(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("meridian schema", flag.ContinueOnError)
	fs.SetOutput(errOut)
	dialect := fs.String("dialect", "", "postgres, mysql or sqlite")
	table := fs.String("table", "", "jobs table name (default meridian_jobs; the other tables take it as a prefix)")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: meridian schema --dialect postgres|mysql|sqlite [--table NAME]")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *dialect == "" || len(pos) > 0 {
		fs.Usage()
		return usagef("--dialect is required, and no arguments are")
	}
	var opts []sqlqueue.Option
	if *table != "" {
		opts = append(opts, sqlqueue.WithTable(*table))
	}
	ddl, err := sqlqueue.Schema(sqlqueue.Dialect(*dialect), opts...)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, ddl)
	return err
}

// migrator is what a queue whose tables have a versioned schema offers
// (the SQL drivers' queues).
type migrator interface {
	Migrate(ctx context.Context, to int) (from, now int, err error)
	MigrateDown(ctx context.Context, to int) (from, now int, err error)
	SchemaVersions(ctx context.Context) (recorded, latest int, err error)
}

func migrateMain(ctx context.Context, args []string, s stdio) error {
	out := s.out
	fs, dsn := newFlags("migrate", "--dsn URL [--to VERSION | --down N | --status] [--yes]", s.errOut)
	to := fs.Int("to", -1, "migrate up or down to this schema version (0 drops the tables)")
	down := fs.Int("down", 0, "undo the last N migrations")
	status := fs.Bool("status", false, "print the recorded and latest schema versions, change nothing")
	yes := fs.Bool("yes", false, "migrate down without asking for confirmation")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *to >= 0 && *down != 0 || *down < 0 || len(pos) > 0 {
		fs.Usage()
		return usagef("pass at most one of --to and --down, with --down at least 1, and no arguments")
	}
	raw, err := queueURL(*dsn)
	if err != nil {
		return err
	}
	// Open without the openers' Setup, which would migrate up first.
	u, err := url.Parse(raw)
	if err != nil {
		return usagef("parsing the queue URL: %v", err)
	}
	query := u.Query()
	if u.Scheme == "sqlite" {
		path := sqlitePath(u)
		if err := checkSQLiteDir(path); err != nil {
			return err
		}
		if _, err := os.Stat(path); *status && err != nil && path != ":memory:" {
			// Opening would create the file: --status changes nothing.
			latest, err := sqlqueue.LatestSchemaVersion(sqlqueue.SQLite)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "schema version 0 (latest %d): no database file %s yet\n", latest, path)
			return err
		}
	}
	query.Set("setup", "false")
	u.RawQuery = query.Encode()
	q, err := queue.Open(ctx, u.String())
	if err != nil {
		return err
	}
	defer q.Close()
	m, ok := q.(migrator)
	if !ok {
		return fmt.Errorf("the %s queue keeps no tables to migrate", u.Scheme)
	}
	recorded, latest, err := m.SchemaVersions(ctx)
	if err != nil {
		return err
	}
	target := latest
	switch {
	case *status:
		_, err = fmt.Fprintf(out, "schema version %d (latest %d)\n", recorded, latest)
		return err
	case *down > 0:
		target = max(recorded-*down, 0)
	case *to >= 0:
		target = *to
	}
	if target < recorded {
		if err := refuseUnattended(s, *yes, "migrate down"); err != nil {
			return err
		}
		table := cmp.Or(query.Get("table"), defaultTable)
		drop := ""
		if target == 0 {
			drop = "; version 0 drops the tables and every job in them"
		}
		if !*yes {
			if err := ask(s, fmt.Sprintf("Undo the migrations of tables %s from schema version %d down to %d%s?", table, recorded, target, drop)); err != nil {
				return err
			}
		}
	}
	from, now := recorded, recorded
	switch {
	case target > recorded:
		from, now, err = m.Migrate(ctx, target)
	case target < recorded:
		from, now, err = m.MigrateDown(ctx, target)
	}
	if err != nil {
		return err
	}
	if from == now {
		if now != recorded {
			// The migration lock held this run while another process
			// migrated.
			_, err = fmt.Fprintf(out, "tables are in place (schema version %d, latest %d): another process migrated them from version %d while this one waited\n", now, latest, recorded)
			return err
		}
		_, err = fmt.Fprintf(out, "tables are in place (schema version %d, latest %d)\n", now, latest)
		return err
	}
	_, err = fmt.Fprintf(out, "migrated from schema version %d to %d (latest %d)\n", from, now, latest)
	return err
}

func statsMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs, dsn := newFlags("stats", "[--dsn URL] [--json]", errOut)
	asJSON := fs.Bool("json", false, "print JSON: one object per queue")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("stats takes no arguments, got %q", pos)
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	caps := driver.CapabilitiesOf(q)
	insp := caps.Inspector
	if insp == nil {
		return caps.Require("Inspector")
	}
	stats, err := insp.QueueStats(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		rows := make([]statsJSON, 0, len(stats))
		for _, s := range stats {
			rows = append(rows, statsJSON{
				Queue: s.Queue, Paused: s.Paused,
				Ready: s.Ready, Scheduled: s.Scheduled, Running: s.Running, Dead: s.Dead,
				WindowSeconds: s.Window.Seconds(), Processed: s.Processed, Failed: s.Failed,
				JobsPerMinute: s.JobsPerMinute,
				AvgRuntimeMS:  ms(s.AvgRuntime), MaxRuntimeMS: ms(s.MaxRuntime), AvgWaitMS: ms(s.AvgWait),
			})
		}
		return writeJSON(out, rows)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue\tready\tscheduled\trunning\tdead\tjobs/min\tavg runtime\tavg wait\t")
	for _, s := range stats {
		name := s.Queue
		if s.Paused {
			name += " (paused)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name,
			display.Count(s.Ready), display.Count(s.Scheduled), display.Count(s.Running), display.Count(s.Dead),
			display.Float(s.JobsPerMinute, 1), s.AvgRuntime.Round(time.Microsecond), s.AvgWait.Round(time.Microsecond))
	}
	return tw.Flush()
}

// statsJSON is one queue in `meridian stats --json`. Counts are
// {"n": N} or {"n": N, "more": true} when the driver stopped counting at N.
type statsJSON struct {
	Queue         string       `json:"queue"`
	Paused        bool         `json:"paused"`
	Ready         driver.Count `json:"ready"`
	Scheduled     driver.Count `json:"scheduled"`
	Running       driver.Count `json:"running"`
	Dead          driver.Count `json:"dead"`
	WindowSeconds float64      `json:"window_seconds"`
	Processed     int64        `json:"processed"`
	Failed        int64        `json:"failed"`
	JobsPerMinute float64      `json:"jobs_per_minute"`
	AvgRuntimeMS  float64      `json:"avg_runtime_ms"`
	MaxRuntimeMS  float64      `json:"max_runtime_ms"`
	AvgWaitMS     float64      `json:"avg_wait_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func failedMain(ctx context.Context, args []string, s stdio) error {
	out := s.out
	usage := "list [--queue NAME] [--limit N] [--json] | retry ID... | forget ID... | flush [--queue NAME] [--yes]  [--dsn URL]"
	fs, dsn := newFlags("failed", usage, s.errOut)
	queueName := fs.String("queue", "", "only this queue (list and flush)")
	limit := fs.Int("limit", 50, "how many to list")
	asJSON := fs.Bool("json", false, "list: print JSON, one object per job")
	yes := fs.Bool("yes", false, "flush: do not ask for confirmation")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usagef("name an action: list, retry, forget or flush")
	}
	action, ids := pos[0], pos[1:]
	switch action {
	case "retry", "forget":
		if len(ids) == 0 {
			return usagef("%s needs one or more job IDs", action)
		}
	case "list", "flush":
		if len(ids) > 0 {
			return usagef("%s takes no job IDs, got %q", action, ids)
		}
		if action == "flush" {
			if err := refuseUnattended(s, *yes, "flush dead letters"); err != nil {
				return err
			}
		}
	default:
		fs.Usage()
		return usagef("unknown action %q: list, retry, forget or flush", action)
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	switch action {
	case "list":
		jobs, err := q.DeadLetters(ctx, *queueName, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			rows := make([]jobJSON, 0, len(jobs))
			for _, j := range jobs {
				rows = append(rows, newJobJSON(driver.JobInfo{Job: j, State: queue.StateDead}))
			}
			return writeJSON(out, rows)
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "id\tqueue\tname\tattempts\terror")
		for _, j := range jobs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", j.ID, j.QueueName(), j.Name, j.Attempts, firstLine(j.LastError, 100))
		}
		return tw.Flush()
	case "flush":
		if !*yes {
			what := "every queue"
			if *queueName != "" {
				what = "queue " + *queueName
			}
			if err := ask(s, "Delete every dead letter of "+what+"?"); err != nil {
				return err
			}
		}
		n, err := q.FlushDead(ctx, *queueName)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "flushed %d dead letters\n", n)
		return err
	}
	if action == "retry" && driver.CapabilitiesOf(q).Controller != nil {
		// Recorded in each job's history; a kept cancelled or done job
		// runs again too.
		return amendJobs(ctx, q, driver.AmendRetry, ids, nil, out)
	}
	var failed []error
	for _, id := range ids {
		do, done := q.RetryDead, "retried"
		if action == "forget" {
			do, done = q.ForgetDead, "forgot"
		}
		if err := do(ctx, id); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", id, err))
			continue
		}
		fmt.Fprintf(out, "%s %s\n", done, id)
	}
	return errors.Join(failed...)
}

// firstLine returns the first line of s, cut to n bytes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// purgeMain runs `meridian purge`: it deletes waiting jobs after asking,
// unless --yes; without a terminal to ask on, --yes is required.
func purgeMain(ctx context.Context, args []string, s stdio) error {
	fs, dsn := newFlags("purge", "[--queue NAME | --all] [--yes] [--dsn URL]", s.errOut)
	queueName := fs.String("queue", "", "the queue whose waiting jobs to delete")
	all := fs.Bool("all", false, "delete the waiting jobs of every queue")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || (*queueName == "") == !*all {
		fs.Usage()
		return usagef("name one queue with --queue, or pass --all, and no arguments")
	}
	if err := refuseUnattended(s, *yes, "purge"); err != nil {
		return err
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	n, err := q.Len(ctx, *queueName)
	if err != nil {
		return err
	}
	what := "queue " + *queueName
	if *all {
		what = "every queue"
	}
	if !*yes {
		if err := ask(s, fmt.Sprintf("Delete the waiting jobs (%d not yet finished, running ones are kept) of %s?", n, what)); err != nil {
			return err
		}
	}
	deleted, err := q.Purge(ctx, *queueName)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.out, "purged %d waiting jobs of %s\n", deleted, what)
	return err
}
