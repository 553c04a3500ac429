package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
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
// unique key (a duplicate would be skipped and never finish) and may not be
// chains. The callbacks are carried, encoded, in the batch's record.
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

// Meta keys of batches.
const (
	// MetaBatch names, on a batch member, the batch's ID. The Worker reads
	// it to record the member's outcome in the batch; users do not write
	// it.
	MetaBatch = "meridian.batch"
	// MetaBatchOf names, on a batch's callback job, the batch's ID, so its
	// handler can read the batch (Batcher.GetBatch).
	MetaBatchOf = "meridian.batch_of"
	// MetaBatchEvent names, on a batch's callback job, which callback it
	// is: "then", "catch" or "finally".
	MetaBatchEvent = "meridian.batch_event"
	// MetaBatchFailed names, on a batch's catch job, the ID of the first
	// member that was dead-lettered.
	MetaBatchFailed = "meridian.batch_failed"
	// MetaBatchError holds, on a batch's catch job, that member's error.
	MetaBatchError = "meridian.batch_error"
)

// BatchEvent names a batch callback.
type BatchEvent string

// The batch callbacks.
const (
	BatchThen    BatchEvent = "then"
	BatchCatch   BatchEvent = "catch"
	BatchFinally BatchEvent = "finally"
)

// MaxBatchName is the most bytes a Batch's Name may have.
const MaxBatchName = 255

// Errors of batches.
var (
	// ErrBatch reports a batch that cannot be dispatched as given.
	ErrBatch = errors.New("queue: invalid batch")
	// ErrBatchClosed reports jobs added to a batch that has finished or
	// was cancelled.
	ErrBatchClosed = errors.New("queue: batch finished or cancelled")
	// ErrNoBatches reports a Pusher or Queue that cannot store batches.
	ErrNoBatches = errors.New("queue: the store does not support batches")
)

// BatchRecord is what a Batcher stores for a batch when it is dispatched.
// Drivers keep Callbacks as opaque text and build the callback job to push
// with Callback.
type BatchRecord struct {
	ID            string
	Name          string
	AllowFailures bool
	// Callbacks holds the batch's callback jobs, encoded.
	Callbacks string
}

// BatchMemberState is where a batch member stands in its batch.
type BatchMemberState string

// The states of a batch member.
const (
	MemberPending   BatchMemberState = "pending" // not finished: ready, scheduled or running
	MemberDone      BatchMemberState = "done"
	MemberFailed    BatchMemberState = "failed" // dead-lettered
	MemberCancelled BatchMemberState = "cancelled"
)

// BatchMember is one job of a batch and where it stands.
type BatchMember struct {
	JobID string
	State BatchMemberState
}

// BatchInfo is a batch's record and progress, read from the store.
type BatchInfo struct {
	ID            string
	Name          string
	AllowFailures bool
	// Total counts the members; Pending those not finished; Done, Failed
	// and Cancelled those that succeeded, were dead-lettered and were
	// cancelled. Total = Pending + Done + Failed + Cancelled.
	Total, Pending, Done, Failed, Cancelled int
	CreatedAt                               time.Time
	// CancelledAt is when the batch was cancelled (by CancelBatch or a
	// failure without AllowFailures), zero if it was not.
	CancelledAt time.Time
	// ThenAt and CatchAt are when the then and catch callbacks became due
	// (and were pushed, if the batch has them); FinishedAt is when every
	// member had finished (and Finally was pushed). Zero until then.
	ThenAt, CatchAt, FinishedAt time.Time
}

// Finished reports whether every member has finished.
func (b BatchInfo) Finished() bool { return !b.FinishedAt.IsZero() }

// Progress is the share of members finished, 0 to 100.
func (b BatchInfo) Progress() int {
	if b.Total == 0 {
		return 0
	}
	return (b.Total - b.Pending) * 100 / b.Total
}

// BatchFilter selects a page of batches, newest first.
type BatchFilter struct {
	// Limit caps the page (1 to 500; 0 means 50).
	Limit int
	// After is the Next of the previous page, "" for the first.
	After string
}

// BatchPage is one page of batches; Next continues it ("" at the end).
type BatchPage struct {
	Batches []BatchInfo
	Next    string
}

// MemberFilter selects a page of a batch's members, in job ID order.
type MemberFilter struct {
	// State keeps the members in that state; "" keeps all.
	State BatchMemberState
	// Limit caps the page (1 to 500; 0 means 50).
	Limit int
	// After is the Next of the previous page, "" for the first.
	After string
}

// MemberPage is one page of members; Next continues it ("" at the end).
type MemberPage struct {
	Members []BatchMember
	Next    string
}

// BatchDispatcher stores a batch's record and its members in one step: all
// or nothing. Every Batcher is one; so is sqlqueue's TxPusher, which stores
// them in the caller's transaction.
type BatchDispatcher interface {
	// PushBatch stores rec and pushes jobs (each carrying MetaBatch = rec.ID)
	// with PushMany's rules, and reports how many were stored; members
	// skipped as duplicates of an active job's ID are not members. Nothing
	// is stored on error.
	PushBatch(ctx context.Context, rec BatchRecord, jobs []Job) (stored int, err error)
}

// Batcher is a Queue that keeps batches (see Batch) in its store. The
// Worker records a member's outcome through FinishMember; DispatchBatch
// stores batches through PushBatch.
type Batcher interface {
	BatchDispatcher
	// AddToBatch pushes jobs (each carrying MetaBatch = id) as new members
	// of batch id, with PushBatch's rules. It returns ErrNotFound for an
	// unknown batch and ErrBatchClosed for one that has finished or was
	// cancelled.
	AddToBatch(ctx context.Context, id string, jobs []Job) (stored int, err error)
	// FinishMember records the outcome o (OutcomeDone: ack;
	// OutcomeFailed: dead-letter with reason; OutcomeCancelled: cancel) of
	// the member under l in its batch, in one transaction with the
	// member's own change: the batch's counters, the cancelling of its
	// pending members when a failure cancels it, and the push of each
	// callback that this outcome makes due (see Batch). If l is not
	// current it returns ErrLeaseLost and changes nothing. A job whose
	// batch is unknown is finished as Ack, Fail or a cancel would.
	FinishMember(ctx context.Context, l Lease, batch string, o Outcome, reason string) error
	// CancelBatch cancels batch id: it marks the batch cancelled and
	// cancels every member not yet finished (a running one as CancelJob
	// does), pushing Finally if that finishes the batch. Cancelling a
	// batch again, or one that has finished, changes nothing. It returns
	// the batch as it is afterwards, or ErrNotFound.
	CancelBatch(ctx context.Context, id string) (BatchInfo, error)
	// GetBatch reads batch id, or returns ErrNotFound.
	GetBatch(ctx context.Context, id string) (BatchInfo, error)
	// ListBatches pages through the batches, newest first.
	ListBatches(ctx context.Context, f BatchFilter) (BatchPage, error)
	// BatchMembers pages through batch id's members that f selects, in
	// job ID order, or returns ErrNotFound.
	BatchMembers(ctx context.Context, id string, f MemberFilter) (MemberPage, error)
}

// batchCallbacks is the value of BatchRecord.Callbacks.
type batchCallbacks struct {
	Then    *chainStep `json:"then,omitempty"`
	Catch   *chainStep `json:"catch,omitempty"`
	Finally *chainStep `json:"finally,omitempty"`
}

// Callback returns the callback job for event to push now, or nil when the
// batch has none. For BatchCatch, failedID and reason name the member that
// failed.
func (r BatchRecord) Callback(event BatchEvent, failedID, reason string) (*Job, error) {
	if r.Callbacks == "" {
		return nil, nil
	}
	var cb batchCallbacks
	if err := json.Unmarshal([]byte(r.Callbacks), &cb); err != nil {
		return nil, fmt.Errorf("%w: batch %s has unreadable callbacks: %v", ErrBatch, r.ID, err)
	}
	var s *chainStep
	switch event {
	case BatchThen:
		s = cb.Then
	case BatchCatch:
		s = cb.Catch
	case BatchFinally:
		s = cb.Finally
	}
	if s == nil {
		return nil, nil
	}
	j := s.job()
	if j.Meta == nil {
		j.Meta = make(map[string]string, 4)
	}
	j.Meta[MetaBatchOf] = r.ID
	j.Meta[MetaBatchEvent] = string(event)
	if event == BatchCatch {
		j.Meta[MetaBatchFailed] = failedID
		j.Meta[MetaBatchError] = reason
	}
	return &j, nil
}

// BatchDue lists the callbacks that b's counters make due and that have
// not yet come: the rule every Batcher applies after changing them.
func BatchDue(b BatchInfo) []BatchEvent {
	var due []BatchEvent
	if b.Failed > 0 && b.CatchAt.IsZero() {
		due = append(due, BatchCatch)
	}
	if b.Total > 0 && b.Done == b.Total && b.ThenAt.IsZero() {
		due = append(due, BatchThen)
	}
	if b.Total > 0 && b.Pending == 0 && b.FinishedAt.IsZero() {
		due = append(due, BatchFinally)
	}
	return due
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
			j.ID = NewID()
		}
		if j.Name == "" {
			return nil, fmt.Errorf("%w: job %d has no name (build members with NewJob)", ErrBatch, i+1)
		}
		if seen[j.ID] {
			return nil, fmt.Errorf("%w: job %d repeats job ID %s", ErrBatch, i+1, j.ID)
		}
		seen[j.ID] = true
		if j.UniqueKey != "" {
			return nil, fmt.Errorf("%w: job %d has a unique key; batch members may not", ErrBatch, i+1)
		}
		if _, ok := j.Meta[MetaChain]; ok {
			return nil, fmt.Errorf("%w: job %d is a chain; batch members may not be", ErrBatch, i+1)
		}
		m := *j
		m.Meta = maps.Clone(j.Meta)
		if m.Meta == nil {
			m.Meta = make(map[string]string, 1)
		}
		m.Meta[MetaBatch] = id
		out[i] = m
	}
	if err := ValidateBatch(out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBatch, err)
	}
	return out, nil
}

// record returns the record that dispatching b stores under id.
func (b Batch) record(id string) (BatchRecord, error) {
	if len(b.Name) > MaxBatchName {
		return BatchRecord{}, fmt.Errorf("%w: name of %d bytes, over %d", ErrBatch, len(b.Name), MaxBatchName)
	}
	var cb batchCallbacks
	for _, c := range []struct {
		what string
		j    *Job
		to   **chainStep
	}{{"then", b.Then, &cb.Then}, {"catch", b.Catch, &cb.Catch}, {"finally", b.Finally, &cb.Finally}} {
		if c.j == nil {
			continue
		}
		if c.j.ID == "" {
			c.j.ID = NewID()
		}
		if c.j.Name == "" {
			return BatchRecord{}, fmt.Errorf("%w: the %s job has no name (build it with NewJob)", ErrBatch, c.what)
		}
		if err := Validate(*c.j); err != nil {
			return BatchRecord{}, fmt.Errorf("%w: the %s job: %w", ErrBatch, c.what, err)
		}
		s := stepOf(*c.j)
		*c.to = &s
	}
	rec := BatchRecord{ID: id, Name: b.Name, AllowFailures: b.AllowFailures}
	if cb != (batchCallbacks{}) {
		enc, err := json.Marshal(cb)
		if err != nil {
			return BatchRecord{}, fmt.Errorf("%w: encoding the callbacks: %v", ErrBatch, err)
		}
		rec.Callbacks = string(enc)
	}
	return rec, nil
}

// DispatchBatch stores b (see Batch) through p, which must be a
// BatchDispatcher (a Batcher, or a driver's transaction Pusher such as
// sqlqueue's TxPusher, so the batch commits with the caller's rows), and
// returns the batch's new ID. The record and every member are stored in
// one step, or nothing is. Members without an ID get one, in b as well.
func DispatchBatch(ctx context.Context, p Pusher, b Batch) (string, error) {
	bd, ok := p.(BatchDispatcher)
	if !ok {
		return "", fmt.Errorf("%w (%T is no queue.BatchDispatcher)", ErrNoBatches, p)
	}
	id := NewID()
	rec, err := b.record(id)
	if err != nil {
		return "", err
	}
	members, err := b.members(id)
	if err != nil {
		return "", err
	}
	if _, err := bd.PushBatch(ctx, rec, members); err != nil {
		return "", err
	}
	return id, nil
}

// AddToBatch pushes jobs as new members of the running batch id through
// q, a Batcher, and reports how many were stored. It returns an error
// matching ErrBatchClosed when the batch has finished or was cancelled.
// Members without an ID get one, in jobs as well.
func AddToBatch(ctx context.Context, q Queue, id string, jobs ...Job) (int, error) {
	b, ok := q.(Batcher)
	if !ok {
		return 0, fmt.Errorf("%w (%T is no queue.Batcher)", ErrNoBatches, q)
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

// MemberTransition is where a member in state from goes when its job ends
// with outcome o, and whether it moves at all: a pending member becomes
// done, failed or cancelled; a failed member retried later (RetryDead)
// becomes done when it succeeds; nothing else moves. Every Batcher counts
// by this rule.
func MemberTransition(from BatchMemberState, o Outcome) (BatchMemberState, bool) {
	switch {
	case o == OutcomeDone && (from == MemberPending || from == MemberFailed):
		return MemberDone, true
	case o == OutcomeFailed && from == MemberPending:
		return MemberFailed, true
	case o == OutcomeCancelled && from == MemberPending:
		return MemberCancelled, true
	}
	return from, false
}

// MaxBatchPage is the most batches or members one page may hold.
const MaxBatchPage = 500

// BatchLimit validates a page size of ListBatches or BatchMembers: 0 means
// 50; 1 to MaxBatchPage are kept; anything else is an error matching
// ErrBatch.
func BatchLimit(n int) (int, error) {
	switch {
	case n == 0:
		return 50, nil
	case n < 0 || n > MaxBatchPage:
		return 0, fmt.Errorf("%w: page size %d, want 1 to %d", ErrBatch, n, MaxBatchPage)
	}
	return n, nil
}
