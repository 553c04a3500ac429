package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// cliUser names who acts from the CLI in a job's history: the OS user,
// marked as the CLI's.
func cliUser() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	return name + " (cli)"
}

// readPayload returns the payload of --payload (text) or --payload-file
// (a file's bytes, "-" for standard input), nil when neither is given. It
// must be one JSON value: the CLI does not know the application's job
// types (the dashboard, with dashboard.JobType, decodes into them).
func readPayload(text, file string, in io.Reader) ([]byte, error) {
	var b []byte
	switch {
	case text != "" && file != "":
		return nil, usagef("give --payload or --payload-file, not both")
	case text != "":
		b = []byte(text)
	case file == "-":
		var err error
		if b, err = io.ReadAll(in); err != nil {
			return nil, fmt.Errorf("reading the payload from standard input: %w", err)
		}
	case file != "":
		var err error
		if b, err = os.ReadFile(file); err != nil {
			return nil, fmt.Errorf("reading the payload: %w", err)
		}
	default:
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, usagef("the payload is not JSON; nothing changed")
	}
	return b, nil
}

// amendJobs applies op to each job of ids (AmendRetry with payload when
// not nil), recording the action as the CLI user's, and prints what each
// was. Jobs it cannot change are named on errOut's error and make the
// result an error; the others are still changed.
func amendJobs(ctx context.Context, q queue.Queue, op driver.AmendOp, ids []string, payload []byte, out io.Writer) error {
	caps := driver.CapabilitiesOf(q)
	if caps.Controller == nil {
		return caps.Require("Controller")
	}
	what, done := "retried from the CLI", "retried"
	if op == driver.AmendRunNow {
		what, done = "run now from the CLI", "ran now"
	}
	if payload != nil {
		what += fmt.Sprintf(" with its payload replaced (%d bytes)", len(payload))
	}
	by := cliUser()
	var failed []error
	for _, id := range ids {
		was, err := caps.Controller.Amend(ctx, id, driver.Amendment{Op: op, Payload: payload, Action: driver.Action{By: by, What: what}})
		switch {
		case errors.Is(err, queue.ErrNotFound):
			failed = append(failed, fmt.Errorf("%s: no such job (a done or cancelled job is kept only while retention is on)", id))
		case errors.Is(err, driver.ErrJobState), errors.Is(err, queue.ErrDuplicate):
			failed = append(failed, fmt.Errorf("%s: %w; nothing changed", id, err))
		case err != nil:
			failed = append(failed, fmt.Errorf("%s: %w", id, err))
		case was == queue.StateDead:
			fmt.Fprintf(out, "%s %s\n", done, id)
		default:
			fmt.Fprintf(out, "%s %s (was %s)\n", done, id, was)
		}
	}
	return errors.Join(failed...)
}

// cloneJobs pushes a copy of each job of ids under a new ID
// (driver.CloneOf), its history naming the job it copies and the CLI
// user, notes the clone in the original's history, and prints "cloned ID
// as NEW". Jobs it cannot clone are named on the result's error; the
// others are still cloned.
func cloneJobs(ctx context.Context, q queue.Queue, ids []string, out io.Writer) error {
	caps := driver.CapabilitiesOf(q)
	if caps.Inspector == nil {
		return caps.Require("Inspector")
	}
	by := cliUser()
	var failed []error
	for _, id := range ids {
		j, err := caps.Inspector.GetJob(ctx, id)
		if err != nil {
			if errors.Is(err, queue.ErrNotFound) {
				err = errors.New("no such job (a done or cancelled job is kept only while retention is on)")
			}
			failed = append(failed, fmt.Errorf("%s: %w", id, err))
			continue
		}
		c := driver.CloneOf(j, by, "cloned from "+id+" from the CLI")
		if err := q.Push(ctx, c); err != nil {
			if errors.Is(err, queue.ErrDuplicate) {
				err = fmt.Errorf("its unique key is held by an active job (%w); nothing stored", err)
			}
			failed = append(failed, fmt.Errorf("%s: %w", id, err))
			continue
		}
		if caps.Controller != nil {
			// The clone holds the record of where it came from; the
			// original's note is a courtesy that a pruned job cannot take.
			_, err := caps.Controller.Amend(ctx, id, driver.Amendment{Op: driver.AmendNote, Action: driver.Action{By: by, What: "cloned as " + c.ID}})
			if err != nil && !errors.Is(err, queue.ErrNotFound) {
				failed = append(failed, fmt.Errorf("%s: cloned as %s, but noting it on the original: %w", id, c.ID, err))
			}
		}
		fmt.Fprintf(out, "cloned %s as %s\n", id, c.ID)
	}
	return errors.Join(failed...)
}
