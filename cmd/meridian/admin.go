package main

import (
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
	"github.com/meridianjobs/meridian/sqlqueue"
)

// The operator's commands: print the DDL, create the tables, read the
// figures, and handle dead letters from a shell.

func init() {
	commands["schema"] = command{
		summary: "print the SQL of every schema migration, for your migration tool",
		run: func(ctx context.Context, args []string) error {
			return schemaMain(args, os.Stdout, os.Stderr)
		},
	}
	commands["migrate"] = command{
		summary: "bring the queue's tables to this release's schema, or back (--to, --down)",
		run: func(ctx context.Context, args []string) error {
			return migrateMain(ctx, args, os.Stdout, os.Stderr)
		},
	}
	commands["stats"] = command{
		summary: "print per-queue figures: ready, scheduled, running, dead, throughput",
		run: func(ctx context.Context, args []string) error {
			return statsMain(ctx, args, os.Stdout, os.Stderr)
		},
	}
	commands["failed"] = command{
		summary: "list, retry, forget or flush dead letters",
		run: func(ctx context.Context, args []string) error {
			return failedMain(ctx, args, os.Stdout, os.Stderr)
		},
	}
}

// newFlags returns a flag set that prints its usage to errOut and a --dsn
// flag defaulting to $MERIDIAN_DSN.
func newFlags(name, usage string, errOut io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("meridian "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	dsn := fs.String("dsn", os.Getenv("MERIDIAN_DSN"), "queue URL: sqlite://path, postgres://..., mysql://... (default $MERIDIAN_DSN)")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: meridian "+name+" "+usage)
		fs.PrintDefaults()
	}
	return fs, dsn
}

// parse parses args, turning -h into a nil error with usage printed.
func parse(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// openQueue opens dsn, which must be given.
func openQueue(ctx context.Context, dsn string) (queue.Queue, func(), error) {
	if dsn == "" {
		return nil, nil, errors.New("no queue URL: pass --dsn or set MERIDIAN_DSN")
	}
	q, err := queue.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	return q, func() { _ = q.Close() }, nil
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
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if *dialect == "" {
		fs.Usage()
		return errors.New("--dialect is required")
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

func migrateMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs, dsn := newFlags("migrate", "--dsn URL [--to VERSION | --down N | --status]", errOut)
	to := fs.Int("to", -1, "migrate up or down to this schema version (0 drops the tables)")
	down := fs.Int("down", 0, "undo the last N migrations")
	status := fs.Bool("status", false, "print the recorded and latest schema versions, change nothing")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if *to >= 0 && *down != 0 || *down < 0 {
		fs.Usage()
		return errors.New("pass at most one of --to and --down, with --down at least 1")
	}
	if *dsn == "" {
		return errors.New("no queue URL: pass --dsn or set MERIDIAN_DSN")
	}
	// Open without the openers' Setup, which would migrate up first.
	u, err := url.Parse(*dsn)
	if err != nil {
		return fmt.Errorf("parsing the queue URL: %w", err)
	}
	query := u.Query()
	query.Set("setup", "false")
	u.RawQuery = query.Encode()
	q, closeFn, err := openQueue(ctx, u.String())
	if err != nil {
		return err
	}
	defer closeFn()
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
		_, err = fmt.Fprintf(out, "tables are in place (schema version %d, latest %d)\n", now, latest)
		return err
	}
	_, err = fmt.Fprintf(out, "migrated from schema version %d to %d (latest %d)\n", from, now, latest)
	return err
}

func statsMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs, dsn := newFlags("stats", "--dsn URL", errOut)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	q, closeFn, err := openQueue(ctx, *dsn)
	if err != nil {
		return err
	}
	defer closeFn()
	insp, ok := q.(queue.Inspector)
	if !ok {
		return fmt.Errorf("the %T driver offers no figures (queue.Inspector)", q)
	}
	stats, err := insp.QueueStats(ctx)
	if err != nil {
		return err
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

func failedMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	usage := "list|retry ID...|forget ID...|flush --dsn URL [--queue NAME] [--limit N]"
	fs, dsn := newFlags("failed", usage, errOut)
	queueName := fs.String("queue", "", "only this queue (list and flush)")
	limit := fs.Int("limit", 50, "how many to list")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs.Usage()
		return errors.New("name an action: list, retry, forget or flush")
	}
	action := args[0]
	if help, err := parse(fs, args[1:]); help || err != nil {
		return err
	}
	ids := fs.Args()
	if (action == "retry" || action == "forget") && len(ids) == 0 {
		return fmt.Errorf("%s needs one or more job IDs", action)
	}
	q, closeFn, err := openQueue(ctx, *dsn)
	if err != nil {
		return err
	}
	defer closeFn()
	switch action {
	case "list":
		jobs, err := q.DeadLetters(ctx, *queueName, *limit)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "id\tqueue\tname\tattempts\terror")
		for _, j := range jobs {
			msg, _, _ := strings.Cut(j.LastError, "\n")
			if len(msg) > 100 {
				msg = msg[:100] + "…"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", j.ID, j.QueueName(), j.Name, j.Attempts, msg)
		}
		return tw.Flush()
	case "retry", "forget":
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
	case "flush":
		n, err := q.FlushDead(ctx, *queueName)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "flushed %d dead letters\n", n)
		return err
	}
	fs.Usage()
	return fmt.Errorf("unknown action %q", action)
}
