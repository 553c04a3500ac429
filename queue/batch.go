package queue

import (
	"context"
	"fmt"
	"maps"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Batch is a group of jobs dispatched together (Laravel's Bus::batch),
// whose progress the store keeps, with callback jobs for its end:
//
//   - Then is pushed once every member has succeeded;
//   - Catch is pushed on the first member that is dead-lettered, with the
//     member's ID and error in its Meta (MetaBatchFailed, MetaBatchError);
//   - Finally is pushed once every member has finished (succeeded, been
//     dead-lettered or been cancelled).
//
// Each callback is itself a typed job (built with NewJob), pushed at most
// once, by whichever process records the member outcome that makes it due:
// the member's ack (or dead-lettering, or cancel), the batch's counters and
// the callback's push are one transaction of the store, and the push is
// conditional on an update of the batch's record that only one transaction
// can make. Two members that finish at the same instant on two processes
// therefore push Then and Finally once between them.
//
// A dead-lettered member cancels the batch unless AllowFailures is set:
// its members that have not finished are cancelled (running ones as
// CancelJob does), so Then never comes and Finally comes once the members
// that were running when it failed have finished. With AllowFailures the
// other members run on, and Finally comes when the last finishes; Catch
// still comes once, on the first failure. A failed member retried later
// (RetryDead) that then succeeds counts as done, and Then comes if it was
// the last: as in Laravel, retrying a batch's failed jobs can complete it.
//
// Members are ordinary jobs with their own options; they may not carry a
// unique key (a duplicate would be skipped and never finish). A member may
// be a chain (Laravel's chain inside a batch: the job Chain.First
// returns): each of its steps is a member of the batch from when it is
// pushed, the next step added to the batch in the transaction that acks
// the one before it, so the batch counts the chain's steps as they come
// (Total grows) and finishes only after the chain's last step; a step
// dead-lettered is a failed member and ends its chain (the chain's Catch
// is pushed, not as a member); in a batch that was cancelled a step's ack
// pushes no next step. A chain in a batch may not contain a batch step
// (Batch.Step). (redisqueue adds the next step to the batch just after
// the ack, in the batch's own hash slot, before counting the step done:
// the batch never looks finished between two steps there either.) The
// callbacks are carried, encoded, in the batch's record.
type Batch struct {
	// Name labels the batch on the dashboard (optional, at most 255
	// bytes).
	Name string
	// Jobs are the members. At least one is required. A job without an ID
	// gets one at dispatch.
	Jobs []Job
	// Then, Catch and Finally are the callback jobs, each optional.
	Then, Catch, Finally *Job
	// AllowFailures keeps the batch running when a member is
	// dead-lettered.
	AllowFailures bool
}

// members returns the jobs of b to push as its members, each carrying
// MetaBatch = id, checked: IDs filled in (in b too), no unique keys, no
// chains, each valid.
func (b Batch) members(id string) ([]Job, error) {
	if len(b.Jobs) == 0 {
		return nil, fmt.Errorf("%w: no jobs", ErrBatch)
	}
	return batchMembers(id, b.Jobs)
}

func batchMembers(id string, jobs []Job) ([]Job, error) {
	out := make([]Job, len(jobs))
	seen := make(map[string]bool, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if j.ID == "" {
			j.ID = driver.NewID()
		}
		if j.Name == "" {
			return nil, fmt.Errorf("%w: job %d has no name (build members with NewJob)", ErrBatch, i+1)
		}
		if seen[j.ID] {
			return nil, fmt.Errorf("%w: job %d repeats job ID %s", ErrBatch, i+1, j.ID)
		}
		seen[j.ID] = true
		if driver.GroupKeyOf(*j) != "" {
			return nil, fmt.Errorf("%w: job %d has a group key; batch members may not", ErrBatch, i+1)
		}
		if j.UniqueKey != "" {
			return nil, fmt.Errorf("%w: job %d has a unique key; batch members may not", ErrBatch, i+1)
		}
		if isBatchStep(j) {
			return nil, fmt.Errorf("%w: job %d is a batch step; batch members may not be", ErrBatch, i+1)
		}
		if rest, ok, err := chainOf(j); err != nil {
			return nil, fmt.Errorf("%w: job %d: %w", ErrBatch, i+1, err)
		} else if ok {
			for _, s := range rest.Next {
				if s.Name == (batchStep{}).JobName() {
					return nil, fmt.Errorf("%w: job %d is a chain with a batch step; a batch member may not be", ErrBatch, i+1)
				}
			}
		}
		m := *j
		m.Meta = maps.Clone(j.Meta)
		if m.Meta == nil {
			m.Meta = make(map[string]string, 1)
		}
		m.Meta[MetaBatch] = id
		out[i] = m
	}
	if err := driver.ValidateBatch(out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBatch, err)
	}
	return out, nil
}

// record returns the record that dispatching b stores under id.
func (b Batch) record(id string) (driver.BatchRecord, error) {
	if len(b.Name) > MaxBatchName {
		return driver.BatchRecord{}, fmt.Errorf("%w: name of %d bytes, over %d", ErrBatch, len(b.Name), MaxBatchName)
	}
	for _, c := range []struct {
		what string
		j    *Job
	}{{"then", b.Then}, {"catch", b.Catch}, {"finally", b.Finally}} {
		if c.j == nil {
			continue
		}
		if c.j.ID == "" {
			c.j.ID = driver.NewID()
		}
		if c.j.Name == "" {
			return driver.BatchRecord{}, fmt.Errorf("%w: the %s job has no name (build it with NewJob)", ErrBatch, c.what)
		}
		if err := driver.Validate(*c.j); err != nil {
			return driver.BatchRecord{}, fmt.Errorf("%w: the %s job: %w", ErrBatch, c.what, err)
		}
	}
	cbs, err := driver.EncodeCallbacks(b.Then, b.Catch, b.Finally)
	if err != nil {
		return driver.BatchRecord{}, err
	}
	return driver.BatchRecord{ID: id, Name: b.Name, AllowFailures: b.AllowFailures, Callbacks: cbs}, nil
}

// DispatchBatch stores b (see Batch) through p, which must be a
// BatchDispatcher (a store with Workflows, or a driver's transaction Pusher such as
// sqlqueue's TxPusher, so the batch commits with the caller's rows), and
// returns the batch's new ID. The record and every member are stored in
// one step, or nothing is. Members without an ID get one, in b as well.
func DispatchBatch(ctx context.Context, p Pusher, b Batch) (string, error) {
	id := driver.NewID()
	if err := dispatchBatch(ctx, p, b, id); err != nil {
		return "", err
	}
	return id, nil
}

// dispatchBatch stores b under id through p (see DispatchBatch). It
// returns an error matching ErrDuplicate when a batch with that ID exists.
func dispatchBatch(ctx context.Context, p Pusher, b Batch, id string) error {
	bd, ok := p.(driver.BatchDispatcher)
	if !ok {
		return fmt.Errorf("%w (%T is no queue.BatchDispatcher)", ErrNoBatches, p)
	}
	rec, err := b.record(id)
	if err != nil {
		return err
	}
	members, err := b.members(id)
	if err != nil {
		return err
	}
	_, err = bd.PushBatch(ctx, rec, members)
	return err
}

// AddToBatch pushes jobs as new members of the running batch id through
// q, a store with Workflows, and reports how many were stored. It returns an error
// matching ErrBatchClosed when the batch has finished or was cancelled.
// Members without an ID get one, in jobs as well.
func AddToBatch(ctx context.Context, q Queue, id string, jobs ...Job) (int, error) {
	b := driver.CapabilitiesOf(q).Workflows
	if b == nil {
		return 0, fmt.Errorf("%w (%T has no Workflows)", ErrNoBatches, q)
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	members, err := batchMembers(id, jobs)
	if err != nil {
		return 0, err
	}
	return b.AddToBatch(ctx, id, members)
}

// BatchOf returns the ID of the batch j belongs to as a member, or "".
func BatchOf(j *Job) string { return j.Meta[MetaBatch] }
