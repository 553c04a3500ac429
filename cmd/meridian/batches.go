package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

func init() {
	commands["batches"] = command{
		summary: "list batches, show one with its members, cancel one, or retry its failed members",
		main: func(ctx context.Context, args []string, s stdio) error {
			return batchesMain(ctx, args, s.out, s.errOut)
		},
	}
}

// batchJSON is one batch in the --json output of `meridian batches`.
type batchJSON struct {
	ID            string     `json:"id"`
	Name          string     `json:"name,omitempty"`
	AllowFailures bool       `json:"allow_failures"`
	Total         int        `json:"total"`
	Pending       int        `json:"pending"`
	Done          int        `json:"done"`
	Failed        int        `json:"failed"`
	Cancelled     int        `json:"cancelled"`
	CreatedAt     time.Time  `json:"created_at"`
	CancelledAt   *time.Time `json:"cancelled_at,omitempty"`
	ThenAt        *time.Time `json:"then_at,omitempty"`
	CatchAt       *time.Time `json:"catch_at,omitempty"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	// Members is filled by `batches show`: the members of --member-state
	// (every member when empty), at most --limit.
	Members []memberJSON `json:"members,omitempty"`
}

// memberJSON is one batch member in `meridian batches show --json`.
type memberJSON struct {
	JobID string                  `json:"job_id"`
	State driver.BatchMemberState `json:"state"`
}

func newBatchJSON(b driver.BatchInfo) batchJSON {
	return batchJSON{ID: b.ID, Name: b.Name, AllowFailures: b.AllowFailures,
		Total: b.Total, Pending: b.Pending, Done: b.Done, Failed: b.Failed, Cancelled: b.Cancelled,
		CreatedAt: b.CreatedAt, CancelledAt: optTime(b.CancelledAt), ThenAt: optTime(b.ThenAt), CatchAt: optTime(b.CatchAt), FinishedAt: optTime(b.FinishedAt)}
}

func batchesMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs, dsn := newFlags("batches", "list [--limit N] [--json] | show ID [--member-state STATE] [--limit N] [--json] | cancel ID... | retry ID [--limit N]  [--dsn URL]", errOut)
	limit := fs.Int("limit", 50, fmt.Sprintf("list and show: how many batches or members to list (at most %d); retry: how many failed members to retry", driver.MaxBatchPage))
	memberState := fs.String("member-state", "", "show: only members in this state: pending, done, failed, cancelled")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usagef("name an action: list, show, cancel or retry")
	}
	switch {
	case pos[0] == "list" && len(pos) == 1, pos[0] == "show" && len(pos) == 2, pos[0] == "retry" && len(pos) == 2, pos[0] == "cancel" && len(pos) >= 2:
	case pos[0] == "list" || pos[0] == "show" || pos[0] == "cancel" || pos[0] == "retry":
		return usagef("usage: meridian batches list, batches show ID, batches cancel ID... or batches retry ID")
	default:
		fs.Usage()
		return usagef("unknown action %q: list, show, cancel or retry", pos[0])
	}
	if *limit < 1 || (*limit > driver.MaxBatchPage && pos[0] != "retry") {
		return usagef("--limit must be 1 to %d, not %d", driver.MaxBatchPage, *limit)
	}
	switch driver.BatchMemberState(*memberState) {
	case "", driver.MemberPending, driver.MemberDone, driver.MemberFailed, driver.MemberCancelled:
	default:
		return usagef("unknown --member-state %q: pending, done, failed or cancelled", *memberState)
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	caps := driver.CapabilitiesOf(q)
	b := caps.Workflows
	if b == nil {
		return caps.Require("Workflows")
	}
	notFound := func(id string, err error) error {
		if errors.Is(err, queue.ErrNotFound) {
			return fmt.Errorf("%s: no such batch", id)
		}
		return err
	}
	switch pos[0] {
	case "cancel":
		var failed []error
		for _, id := range pos[1:] {
			info, err := b.CancelBatch(ctx, id)
			if err != nil {
				failed = append(failed, notFound(id, err))
				continue
			}
			fmt.Fprintf(out, "cancelled batch %s: %d of %d members cancelled, %d done, %d failed\n", id, info.Cancelled, info.Total, info.Done, info.Failed)
		}
		return errors.Join(failed...)
	case "retry":
		n, more, err := dashboard.ForQueue(q).RetryFailedMembers(ctx, pos[1], *limit)
		if err != nil {
			return notFound(pos[1], err)
		}
		fmt.Fprintf(out, "retried %d failed members of batch %s", n, pos[1])
		if more {
			fmt.Fprintf(out, "; more are left (--limit %d)", *limit)
		}
		fmt.Fprintln(out)
		return nil
	case "show":
		info, err := b.GetBatch(ctx, pos[1])
		if err != nil {
			return notFound(pos[1], err)
		}
		page, err := b.BatchMembers(ctx, pos[1], driver.MemberFilter{State: driver.BatchMemberState(*memberState), Limit: *limit})
		if err != nil {
			return notFound(pos[1], err)
		}
		if *asJSON {
			v := newBatchJSON(info)
			for _, m := range page.Members {
				v.Members = append(v.Members, memberJSON{JobID: m.JobID, State: m.State})
			}
			return writeJSON(out, v)
		}
		return printBatch(out, info, page)
	}
	page, err := b.ListBatches(ctx, driver.BatchFilter{Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		rows := make([]batchJSON, 0, len(page.Batches))
		for _, in := range page.Batches {
			rows = append(rows, newBatchJSON(in))
		}
		return writeJSON(out, rows)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tname\tprogress\tpending\tdone\tfailed\tcancelled\tcreated\tstatus")
	for _, in := range page.Batches {
		fmt.Fprintf(tw, "%s\t%s\t%d%%\t%d\t%d\t%d\t%d\t%s\t%s\n", in.ID, in.Name, in.Progress(), in.Pending, in.Done, in.Failed, in.Cancelled,
			in.CreatedAt.UTC().Format(time.RFC3339), batchStatus(in))
	}
	return tw.Flush()
}

// batchStatus is a batch's state in one word.
func batchStatus(b driver.BatchInfo) string {
	switch {
	case !b.CancelledAt.IsZero() && b.Finished():
		return "cancelled"
	case !b.CancelledAt.IsZero():
		return "cancelling"
	case b.Finished() && b.Failed > 0:
		return "finished with failures"
	case b.Finished():
		return "finished"
	default:
		return "running"
	}
}

// printBatch writes one batch's fields, one per line, then its members.
func printBatch(out io.Writer, b driver.BatchInfo, members driver.MemberPage) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	row("id", b.ID)
	if b.Name != "" {
		row("name", b.Name)
	}
	row("status", batchStatus(b))
	row("progress", fmt.Sprintf("%d%% (%d of %d finished)", b.Progress(), b.Total-b.Pending, b.Total))
	row("members", fmt.Sprintf("%d pending, %d done, %d failed, %d cancelled", b.Pending, b.Done, b.Failed, b.Cancelled))
	row("allow failures", b.AllowFailures)
	row("created", timeOrDash(b.CreatedAt))
	row("cancelled", timeOrDash(b.CancelledAt))
	row("then", timeOrDash(b.ThenAt))
	row("catch", timeOrDash(b.CatchAt))
	row("finished", timeOrDash(b.FinishedAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(members.Members) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "member job\tstate")
	for _, m := range members.Members {
		fmt.Fprintf(tw, "%s\t%s\n", m.JobID, m.State)
	}
	if members.Next != "" {
		fmt.Fprintf(tw, "%s\t\n", strings.Repeat(".", 3)+" more (raise --limit)")
	}
	return tw.Flush()
}
