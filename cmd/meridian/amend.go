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
