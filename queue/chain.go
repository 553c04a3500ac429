package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Chain is a list of jobs that run one after another (Laravel's
// Bus::chain): each step is pushed only when the step before it succeeded.
// When a step is dead-lettered the steps after it never run, and Catch, if
// set, is pushed in its place with the failure in its Meta (MetaChainFailed,
// MetaChainError). A cancelled step ends the chain without Catch.
//
// The chain lives in the store, not in a process: the first step is pushed
// carrying the steps after it and Catch in its Meta (MetaChain), and the
// Worker that finishes a step records its outcome and pushes what comes
// next in one transaction (the outcome's Push in Complete). A process killed
// between two steps therefore loses nothing: either the step's ack and the
// next step are both stored, or neither is and the step runs again after
// its lease.
//
// Build the steps with NewJob. Only the first step may carry a unique key
// (a later step's key, held by another job when it came due, would end the
// chain silently). The steps after the first and Catch, encoded, must fit
// in the first step's Meta (MaxMetaBytes, 64 KiB): keep their payloads
// small and pass large data by reference.
type Chain struct {
	// Steps run in order. At least one is required. A step without an ID
	// gets one at dispatch.
	Steps []Job
	// Catch, if set, is pushed once when a step is dead-lettered.
	Catch *Job
}

// chainStep is a step (or the catch job) as MetaChain carries it.
type chainStep struct {
	ID          string            `json:"id"`
	Queue       string            `json:"queue,omitempty"`
	Name        string            `json:"name"`
	Payload     []byte            `json:"payload,omitempty"`
	Priority    int               `json:"priority,omitempty"`
	MaxAttempts int               `json:"max_attempts,omitempty"`
	Timeout     time.Duration     `json:"timeout,omitempty"`
	RetryUntil  time.Time         `json:"retry_until,omitzero"`
	AvailableAt time.Time         `json:"available_at,omitzero"`
	Tags        []string          `json:"tags,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`
}

// chainRest is the value of MetaChain: the steps still to run after the
// job that carries it, and the catch job.
type chainRest struct {
	Next  []chainStep `json:"next,omitempty"`
	Catch *chainStep  `json:"catch,omitempty"`
}

func stepOf(j Job) chainStep {
	return chainStep{ID: j.ID, Queue: j.Queue, Name: j.Name, Payload: j.Payload, Priority: j.Priority,
		MaxAttempts: j.MaxAttempts, Timeout: j.Timeout, RetryUntil: j.RetryUntil, AvailableAt: j.AvailableAt,
		Tags: j.Tags, Meta: j.Meta}
}

func (s chainStep) job() Job {
	return Job{ID: s.ID, Queue: s.Queue, Name: s.Name, Payload: s.Payload, Priority: s.Priority,
		MaxAttempts: s.MaxAttempts, Timeout: s.Timeout, RetryUntil: s.RetryUntil, AvailableAt: s.AvailableAt,
		Tags: s.Tags, Meta: maps.Clone(s.Meta)}
}

// withRest returns j carrying rest in its Meta (or j unchanged when rest is
// empty).
func withRest(j Job, rest chainRest) (Job, error) {
	if len(rest.Next) == 0 && rest.Catch == nil {
		return j, nil
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return j, err
	}
	j.Meta = maps.Clone(j.Meta)
	if j.Meta == nil {
		j.Meta = make(map[string]string, 1)
	}
	j.Meta[MetaChain] = string(b)
	return j, nil
}

// First returns the job that dispatching c pushes: its first step carrying
// the rest of the chain. Steps without an ID get one (in c as well). Push
// it with any Pusher, for example inside a transaction together with other
// jobs.
func (c Chain) First() (Job, error) {
	if len(c.Steps) == 0 {
		return Job{}, fmt.Errorf("%w: no steps", ErrChain)
	}
	seen := make(map[string]bool, len(c.Steps)+1)
	check := func(what string, j *Job, first bool) error {
		if j.ID == "" {
			j.ID = driver.NewID()
		}
		if j.Name == "" {
			return fmt.Errorf("%w: %s has no name (build steps with NewJob)", ErrChain, what)
		}
		if seen[j.ID] {
			return fmt.Errorf("%w: %s repeats job ID %s", ErrChain, what, j.ID)
		}
		seen[j.ID] = true
		if !first && j.UniqueKey != "" {
			return fmt.Errorf("%w: %s has a unique key; only the first step may have one", ErrChain, what)
		}
		if _, ok := j.Meta[MetaChain]; ok {
			return fmt.Errorf("%w: %s already carries %s", ErrChain, what, MetaChain)
		}
		return nil
	}
	for i := range c.Steps {
		if err := check(fmt.Sprintf("step %d", i+1), &c.Steps[i], i == 0); err != nil {
			return Job{}, err
		}
	}
	var rest chainRest
	for _, s := range c.Steps[1:] {
		rest.Next = append(rest.Next, stepOf(s))
	}
	if c.Catch != nil {
		if err := check("the catch job", c.Catch, false); err != nil {
			return Job{}, err
		}
		st := stepOf(*c.Catch)
		rest.Catch = &st
	}
	first, err := withRest(c.Steps[0], rest)
	if err != nil {
		return Job{}, fmt.Errorf("%w: encoding the steps: %v", ErrChain, err)
	}
	if err := driver.Validate(first); err != nil {
		return Job{}, fmt.Errorf("%w: the first step carrying the rest of the chain: %w", ErrChain, err)
	}
	return first, nil
}

// DispatchChain pushes c's first step carrying the rest of the chain (see
// Chain) with one Push, so the chain is stored whole or not at all, also
// inside the caller's transaction (a driver's Tx Pusher). It returns the
// chain's ID, which is its first step's. A first step skipped as a
// duplicate of its unique key dispatches nothing and is not an error, as
// with Dispatch; the ID returned is then the active job's that holds the
// key, when the driver names it (as Enqueue).
func DispatchChain(ctx context.Context, p Pusher, c Chain) (string, error) {
	first, err := c.First()
	if err != nil {
		return "", err
	}
	err = p.Push(ctx, first)
	if errors.Is(err, ErrDuplicate) {
		var de *driver.DuplicateError
		if errors.As(err, &de) && de.ExistingID != "" {
			return de.ExistingID, nil
		}
		return first.ID, nil
	}
	if err != nil {
		return "", err
	}
	return first.ID, nil
}

// chainOf reads the chain j carries, if any. A job outside every chain
// costs one map lookup.
func chainOf(j *Job) (chainRest, bool, error) {
	s, ok := j.Meta[MetaChain]
	if !ok {
		return chainRest{}, false, nil
	}
	var rest chainRest
	if err := json.Unmarshal([]byte(s), &rest); err != nil {
		return chainRest{}, true, fmt.Errorf("%w: job %s carries an unreadable %s: %v", ErrChain, j.ID, MetaChain, err)
	}
	return rest, true, nil
}

// next is the job that follows the chain step prev that succeeded, or
// none; it names prev in MetaChainAfter.
func (r chainRest) next(prev string) ([]Job, error) {
	if len(r.Next) == 0 {
		return nil, nil
	}
	nj := r.Next[0].job()
	if nj.Meta == nil {
		nj.Meta = make(map[string]string, 2)
	}
	nj.Meta[MetaChainAfter] = prev
	j, err := withRest(nj, chainRest{Next: r.Next[1:], Catch: r.Catch})
	if err != nil {
		return nil, err
	}
	return []Job{j}, nil
}

// caught is the catch job pushed when step failed with reason, or none.
func (r chainRest) caught(step *Job, reason string) []Job {
	if r.Catch == nil {
		return nil
	}
	j := r.Catch.job()
	if j.Meta == nil {
		j.Meta = make(map[string]string, 2)
	}
	j.Meta[MetaChainFailed] = step.ID
	j.Meta[MetaChainError] = reason
	return []Job{j}
}
