package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

func init() {
	commands["sequences"] = command{
		summary: "list the sequences a dead job holds, or release one",
		main: func(ctx context.Context, args []string, s stdio) error {
			return sequencesMain(ctx, args, s.out, s.errOut)
		},
	}
}

// sequenceJSON is one held sequence in `meridian sequences list --json`.
type sequenceJSON struct {
	Queue string `json:"queue"`
	Key   string `json:"key"`
	// Waiting counts the members waiting behind the dead job.
	Waiting int       `json:"waiting"`
	DeadAt  time.Time `json:"dead_at"`
	Head    jobJSON   `json:"head"`
}

// deadAt is when a held sequence's head was dead-lettered.
func deadAt(s driver.SequenceInfo) time.Time {
	if s.Head.FinishedAt.IsZero() {
		return s.Head.UpdatedAt.UTC()
	}
	return s.Head.FinishedAt.UTC()
}

func sequencesMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs, dsn := newFlags("sequences", "list [--queue NAME] [--limit N] [--json] | release QUEUE KEY  [--dsn URL]", errOut)
	queueName := fs.String("queue", "", "list: only this queue's sequences")
	limit := fs.Int("limit", driver.DefaultHeldSequences, fmt.Sprintf("list: how many to list (at most %d)", driver.DefaultHeldSequences))
	asJSON := fs.Bool("json", false, "list: print JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usagef("name an action: list or release")
	}
	switch {
	case pos[0] == "list" && len(pos) == 1, pos[0] == "release" && len(pos) == 3:
	case pos[0] == "list" || pos[0] == "release":
		return usagef("usage: meridian sequences list [--queue NAME] or sequences release QUEUE KEY (-- before a key that begins with -)")
	default:
		fs.Usage()
		return usagef("unknown action %q: list or release", pos[0])
	}
	if *limit < 1 || *limit > driver.DefaultHeldSequences {
		return usagef("--limit must be 1 to %d, not %d", driver.DefaultHeldSequences, *limit)
	}
	if pos[0] == "release" && (pos[1] == "" || pos[2] == "") {
		return usagef("name the sequence: meridian sequences release QUEUE KEY")
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	caps := driver.CapabilitiesOf(q)
	seq := caps.Sequences
	if seq == nil {
		return caps.Require("Sequencer")
	}
	if pos[0] == "release" {
		return releaseSequence(ctx, caps, pos[1], pos[2], out)
	}
	held, err := seq.HeldSequences(ctx, *queueName, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		rows := make([]sequenceJSON, 0, len(held))
		for _, s := range held {
			rows = append(rows, sequenceJSON{Queue: s.Queue, Key: s.Key, Waiting: s.Waiting, DeadAt: deadAt(s), Head: newJobJSON(s.Head)})
		}
		return writeJSON(out, rows)
	}
	if len(held) == 0 {
		fmt.Fprintln(out, "no sequence is held by a dead job")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "queue\tkey\tdead job\tname\tdead since\twaiting\terror")
	for _, s := range held {
		// The key is quoted: it is the application's data, spaces,
		// tabs and all, and release takes it back as one argument.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Queue, strconv.Quote(s.Key), s.Head.ID, s.Head.Name,
			deadAt(s).Format(time.RFC3339), s.Waiting, firstLine(s.Head.LastError, 80))
	}
	return tw.Flush()
}

// releaseSequence releases the sequence key of queueName held by its dead
// head and notes the release in the head's history, as the CLI user's.
func releaseSequence(ctx context.Context, caps driver.Capabilities, queueName, key string, out io.Writer) error {
	var head driver.SequenceInfo
	held, err := caps.Sequences.HeldSequences(ctx, queueName, driver.DefaultHeldSequences)
	if err != nil {
		return err
	}
	for _, s := range held {
		if s.Key == key {
			head = s
		}
	}
	if err := caps.Sequences.ReleaseSequence(ctx, queueName, key); err != nil {
		if errors.Is(err, queue.ErrNotFound) {
			return fmt.Errorf("sequence %s of queue %s: not held by a dead job (released already, its dead job retried or deleted, or no such sequence); nothing changed", strconv.Quote(key), queueName)
		}
		return err
	}
	if head.Head.ID == "" {
		fmt.Fprintf(out, "released sequence %s of queue %s\n", strconv.Quote(key), queueName)
		return nil
	}
	fmt.Fprintf(out, "released sequence %s of queue %s: dead job %s stays a dead letter, the next of %d waiting runs\n", strconv.Quote(key), queueName, head.Head.ID, head.Waiting)
	if caps.Controller != nil {
		what := fmt.Sprintf("released its sequence %s (%d waiting behind it) from the CLI", strconv.Quote(key), head.Waiting)
		_, err := caps.Controller.Amend(ctx, head.Head.ID, driver.Amendment{Op: driver.AmendNote, Action: driver.Action{By: cliUser(), What: what}})
		if err != nil && !errors.Is(err, queue.ErrNotFound) {
			return fmt.Errorf("released, but noting it in the history of job %s: %w", head.Head.ID, err)
		}
	}
	return nil
}
