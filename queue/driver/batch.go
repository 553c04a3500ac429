package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Meta keys of batches.
const (
	// MetaBatch names, on a batch member, the batch's ID. The Worker reads
	// it to record the member's outcome in the batch; users do not write
	// it.
	MetaBatch = "meridian.batch"
	// MetaBatchOf names, on a batch's callback job, the batch's ID, so its
	// handler can read the batch (Workflows.GetBatch).
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

// Errors of batches.
var (
	// ErrBatch reports a batch that cannot be dispatched as given.
	ErrBatch = errors.New("queue: invalid batch")
	// ErrBatchClosed reports jobs added to a batch that has finished or
	// was cancelled.
	ErrBatchClosed = errors.New("queue: batch finished or cancelled")
)

// BatchRecord is what a store with Workflows keeps for a batch when it is dispatched.
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
// or nothing. Every store with Workflows is one; so is sqlqueue's TxPusher, which stores
// them in the caller's transaction.
type BatchDispatcher interface {
	// PushBatch stores rec and pushes jobs (each carrying MetaBatch = rec.ID)
	// with PushMany's rules, and reports how many were stored; members
	// skipped as duplicates of an active job's ID are not members. Nothing
	// is stored on error; a batch with rec.ID that exists is an error
	// matching ErrDuplicate.
	PushBatch(ctx context.Context, rec BatchRecord, jobs []Job) (stored int, err error)
}

// batchCallbacks is the value of BatchRecord.Callbacks.
type batchCallbacks struct {
	Then    *step `json:"then,omitempty"`
	Catch   *step `json:"catch,omitempty"`
	Finally *step `json:"finally,omitempty"`
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
	var s *step
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
// not yet come: the rule every store with Workflows applies after changing them.
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

// step is a callback job as BatchRecord.Callbacks carries it.
type step struct {
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

func stepOf(j Job) step {
	return step{ID: j.ID, Queue: j.Queue, Name: j.Name, Payload: j.Payload, Priority: j.Priority,
		MaxAttempts: j.MaxAttempts, Timeout: j.Timeout, RetryUntil: j.RetryUntil, AvailableAt: j.AvailableAt,
		Tags: j.Tags, Meta: j.Meta}
}

func (s step) job() Job {
	return Job{ID: s.ID, Queue: s.Queue, Name: s.Name, Payload: s.Payload, Priority: s.Priority,
		MaxAttempts: s.MaxAttempts, Timeout: s.Timeout, RetryUntil: s.RetryUntil, AvailableAt: s.AvailableAt,
		Tags: s.Tags, Meta: maps.Clone(s.Meta)}
}

// EncodeCallbacks returns the BatchRecord.Callbacks text that carries the
// callback jobs then, catch and finally (each may be nil), or "" when all
// are nil. The jobs must be valid (Validate) and have IDs.
func EncodeCallbacks(then, catch, finally *Job) (string, error) {
	var cb batchCallbacks
	for _, c := range []struct {
		j  *Job
		to **step
	}{{then, &cb.Then}, {catch, &cb.Catch}, {finally, &cb.Finally}} {
		if c.j != nil {
			s := stepOf(*c.j)
			*c.to = &s
		}
	}
	if cb == (batchCallbacks{}) {
		return "", nil
	}
	enc, err := json.Marshal(cb)
	if err != nil {
		return "", fmt.Errorf("%w: encoding the callbacks: %v", ErrBatch, err)
	}
	return string(enc), nil
}

// MemberTransition is where a member in state from goes when its job ends
// with outcome o, and whether it moves at all: a pending member becomes
// done, failed or cancelled; a failed member retried later (RetryDead)
// becomes done when it succeeds; nothing else moves. Every store with Workflows counts
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
