package driver

import (
	"errors"
	"slices"
	"strings"
	"time"
)

// AmendOp is what Controller.Amend does to a job.
type AmendOp string

// The amendments.
const (
	// AmendRetry runs a finished job again under its ID: a dead letter
	// and, on a store that keeps finished jobs (retention on), a
	// cancelled or done one goes back to ready, available now, with its
	// attempts reset and, when Amendment.Payload is set, that payload in
	// place of its own. Its history stays. A job that was cancelled or
	// done as a batch member is refused (its batch has counted it).
	AmendRetry AmendOp = "retry"
	// AmendRunNow makes a scheduled job (delayed or backing off) ready
	// now, its attempts as they are.
	AmendRunNow AmendOp = "run_now"
	// AmendNote changes nothing but the history: it records the action
	// on a job in any state (the dashboard notes who dispatched a job).
	AmendNote AmendOp = "note"
)

// Amendment is one change Controller.Amend makes to a job.
type Amendment struct {
	Op AmendOp
	// Payload, with AmendRetry and when not nil, replaces the job's
	// payload. The store stores it as bytes; whoever amends validates it
	// (the dashboard decodes it into the job's registered type first).
	Payload []byte
	// Action is recorded in the job's history (JobInfo.Actions) with
	// the change; the store sets its At to now when it is zero.
	Action Action
	// From, when set, is the only state the change applies to: a job
	// found in another state is left alone and Amend reports
	// ErrJobState. A bulk retry of dead letters sets StateDead, so a job
	// that became done or cancelled since it was listed is not run again.
	From JobState
}

// Action is one change an operator made to a job, as its history keeps
// it.
type Action struct {
	At time.Time
	// By names who acted (the dashboard's identity hook, the CLI's user),
	// "" when unknown.
	By string
	// What says what changed ("retried from cancelled, payload edited
	// (12 → 14 bytes)").
	What string
}

// Dated returns a with At set to now when it is zero: how every store
// dates an action recorded without a time.
func (a Action) Dated(now time.Time) Action {
	if a.At.IsZero() {
		a.At = now
	}
	return a
}

// ErrJobState reports an amendment asked of a job in a state it does
// not apply to (AmendRunNow on a job that is not scheduled, AmendRetry
// on one that has not finished). Nothing changed.
var ErrJobState = errors.New("queue: the job is not in a state for that change")

// CloneOf returns a copy of the job info describes to push as a new job
// under a new ID (the dashboard's and the CLI's clone): its queue, name,
// payload, priority, attempt limit, timeout, tags, unique key and states,
// and the metadata the application set (keys outside the "meridian."
// namespace: a clone is no batch, chain, graph or group member and no
// periodic tick), ready now with no attempts. Its Actions record, by
// by, what: the push stores them in the clone's history.
func CloneOf(info JobInfo, by, what string) Job {
	j := info.Job
	c := Job{
		ID:           NewID(),
		Queue:        j.Queue,
		Name:         j.Name,
		Payload:      slices.Clone(j.Payload),
		Priority:     j.Priority,
		MaxAttempts:  j.MaxAttempts,
		Timeout:      j.Timeout,
		UniqueKey:    j.UniqueKey,
		UniqueStates: slices.Clone(j.UniqueStates),
		Tags:         slices.Clone(j.Tags),
		Actions:      []Action{{By: by, What: what}},
	}
	for k, v := range j.Meta {
		if strings.HasPrefix(k, "meridian.") {
			continue
		}
		if c.Meta == nil {
			c.Meta = make(map[string]string, len(j.Meta))
		}
		c.Meta[k] = v
	}
	return c
}
