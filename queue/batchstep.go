package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/meridianjobs/meridian/queue/driver"
)

// batchStep is a batch as the chain step that dispatches it carries it
// (Batch.Step). Every Worker handles it (NewWorker registers runBatchStep).
type batchStep struct {
	Name          string      `json:"name,omitempty"`
	Jobs          []chainStep `json:"jobs"`
	Then          *chainStep  `json:"then,omitempty"`
	Catch         *chainStep  `json:"catch,omitempty"`
	Finally       *chainStep  `json:"finally,omitempty"`
	AllowFailures bool        `json:"allow_failures,omitempty"`
}

// JobName is the name of every batch step, reserved for it.
func (batchStep) JobName() string { return "meridian.batch_step" }

// isBatchStep reports whether j is a batch's chain step.
func isBatchStep(j *Job) bool { return j.Name == batchStep{}.JobName() }

// Step returns a chain step that runs b (Laravel's batch inside a chain):
// put it in a Chain's Steps like any job. When the chain reaches it, the
// Worker that runs the step stores b as a batch, whose ID is the step's
// job ID (so a step run twice, after a crash, stores it once), and the
// chain goes on when b's Then comes: b's own Then first if it has one,
// carrying the rest of the chain, else the next step in Then's place,
// naming the batch in MetaChainAfter. If a member is dead-lettered, the
// chain's Catch is b's Catch (unless b has one of its own), with the
// member in MetaBatchFailed and MetaBatchError, and the chain goes no
// further: with AllowFailures the other members run on, but Then never
// comes. Cancelling the batch ends the chain. b's Finally comes as usual.
//
// opts set the step's own job options (its queue: a Worker serving that
// queue dispatches the batch). The members and callbacks are carried in
// the step's payload; members without an ID get one, in b as well. A
// batch step cannot be a batch's member, nor the first step of a chain
// that is one. It returns an error matching ErrBatch for a batch that
// DispatchBatch would refuse.
func (b Batch) Step(opts ...Option) (Job, error) {
	if len(b.Jobs) == 0 {
		return Job{}, fmt.Errorf("%w: no jobs", ErrBatch)
	}
	// The checks of DispatchBatch, under a placeholder ID.
	if _, err := b.record("step"); err != nil {
		return Job{}, err
	}
	if _, err := batchMembers("step", b.Jobs); err != nil {
		return Job{}, err
	}
	p := batchStep{Name: b.Name, AllowFailures: b.AllowFailures}
	for _, j := range b.Jobs {
		p.Jobs = append(p.Jobs, stepOf(j))
	}
	for _, c := range []struct {
		from *Job
		to   **chainStep
	}{{b.Then, &p.Then}, {b.Catch, &p.Catch}, {b.Finally, &p.Finally}} {
		if c.from != nil {
			s := stepOf(*c.from)
			*c.to = &s
		}
	}
	j, err := NewJob(p, opts...)
	if err != nil {
		return Job{}, fmt.Errorf("%w: encoding the batch step: %w", ErrBatch, err)
	}
	if j.UniqueKey != "" {
		return Job{}, fmt.Errorf("%w: a batch step may not have a unique key", ErrBatch)
	}
	if err := driver.Validate(j); err != nil {
		return Job{}, fmt.Errorf("%w: the batch step: %w", ErrBatch, err)
	}
	return j, nil
}

// runBatchStep is the handler of batch steps: it stores the batch that
// step j carries, under j's ID, with the rest of j's chain after its Then
// and the chain's Catch as its Catch. A batch stored by an earlier run of
// the step is not stored again.
func runBatchStep(ctx context.Context, q Queue, p batchStep) error {
	j, _ := JobFromContext(ctx)
	rest, _, err := chainOf(&j)
	if err != nil {
		return Permanent(err)
	}
	b := Batch{Name: p.Name, AllowFailures: p.AllowFailures}
	for _, s := range p.Jobs {
		b.Jobs = append(b.Jobs, s.job())
	}
	for _, c := range []struct {
		from *chainStep
		to   **Job
	}{{p.Then, &b.Then}, {p.Catch, &b.Catch}, {p.Finally, &b.Finally}} {
		if c.from != nil {
			cj := c.from.job()
			*c.to = &cj
		}
	}
	switch {
	case b.Then != nil && (len(rest.Next) > 0 || rest.Catch != nil):
		then, err := withRest(*b.Then, chainRest{Next: rest.Next, Catch: rest.Catch})
		if err != nil {
			return Permanent(fmt.Errorf("%w: encoding the rest of the chain: %v", ErrChain, err))
		}
		b.Then = &then
	case len(rest.Next) > 0:
		next, err := rest.next(j.ID)
		if err != nil {
			return Permanent(fmt.Errorf("%w: encoding the rest of the chain: %v", ErrChain, err))
		}
		b.Then = &next[0]
	}
	if b.Catch == nil && rest.Catch != nil {
		c := rest.Catch.job()
		b.Catch = &c
	}
	err = dispatchBatch(ctx, q, b, j.ID)
	if errors.Is(err, ErrDuplicate) {
		return nil // stored by an earlier run of this step
	}
	return err
}
