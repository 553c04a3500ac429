package memqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// maxFinishedBatches is how many finished batches a Queue keeps: when one
// more finishes, the one that finished first is forgotten (GetBatch then
// answers ErrNotFound), as sqlqueue prunes finished batches after its
// retention, so a long-lived Queue does not grow with every batch.
const maxFinishedBatches = 1000

// batch is one batch's record, counters and members (see driver.Workflows).
// Batches are kept until maxFinishedBatches newer ones have finished.
type batch struct {
	rec     driver.BatchRecord
	info    driver.BatchInfo // Pending is derived when read
	pos     int              // index in Queue.batchList
	members map[string]driver.BatchMemberState
}

// infoLocked returns b's info with Pending filled in.
func (b *batch) infoLocked() driver.BatchInfo {
	in := b.info
	in.Pending = in.Total - in.Done - in.Failed - in.Cancelled
	return in
}

var _ driver.Workflows = (*Queue)(nil)

// PushBatch stores rec and pushes its members in one critical section
// (see driver.BatchDispatcher).
func (q *Queue) PushBatch(ctx context.Context, rec driver.BatchRecord, jobs []queue.Job) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memqueue: pushing batch %s: %w", rec.ID, err)
	}
	if err := driver.ValidateBatch(jobs); err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.batches[rec.ID] != nil {
		return 0, fmt.Errorf("memqueue: pushing batch %s: %w", rec.ID, queue.ErrDuplicate)
	}
	now := q.now()
	b := &batch{rec: rec, pos: len(q.batchList), members: make(map[string]driver.BatchMemberState, len(jobs)),
		info: driver.BatchInfo{ID: rec.ID, Name: rec.Name, AllowFailures: rec.AllowFailures, CreatedAt: now}}
	if q.batches == nil {
		q.batches = make(map[string]*batch)
	}
	q.batches[rec.ID] = b
	q.batchList = append(q.batchList, b)
	return q.addMembersLocked(b, jobs, now), nil
}

// AddToBatch pushes jobs as new members of batch id (see driver.Workflows).
func (q *Queue) AddToBatch(ctx context.Context, id string, jobs []queue.Job) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memqueue: adding to batch %s: %w", id, err)
	}
	if err := driver.ValidateBatch(jobs); err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.batches[id]
	switch {
	case b == nil:
		return 0, fmt.Errorf("memqueue: adding to batch %s: %w", id, queue.ErrNotFound)
	case !b.info.CancelledAt.IsZero() || !b.info.FinishedAt.IsZero():
		return 0, fmt.Errorf("memqueue: adding to batch %s: %w", id, queue.ErrBatchClosed)
	}
	return q.addMembersLocked(b, jobs, q.now()), nil
}

// addMembersLocked pushes jobs as members of b, skipping duplicates.
func (q *Queue) addMembersLocked(b *batch, jobs []queue.Job, now time.Time) int {
	n := 0
	for _, j := range jobs {
		if q.pushLocked(j, now) != nil {
			continue // a duplicate: not a member
		}
		if _, ok := b.members[j.ID]; !ok {
			b.info.Total++
		}
		b.members[j.ID] = driver.MemberPending
		n++
	}
	return n
}

// finishMember records the outcome of the member under l in its batch
// (Complete of an outcome with a Batch) in one critical section; limit
// is a dead letter's attempt limit (see failLocked), res a done member's
// result to keep, and push the jobs to push with the outcome: with a done
// pending member of a batch that runs, new members (its chain's next
// step); with a failure, plain jobs (its chain's catch job).
func (q *Queue) finishMember(ctx context.Context, l driver.Lease, batchID string, o driver.Outcome, reason string, limit int, res kept, push []queue.Job) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: finishing batch member %s: %w", l.JobID, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	e := q.leasedLocked(l, now.UnixNano())
	if e == nil {
		return fmt.Errorf("memqueue: finishing batch member %s: %w", l.JobID, queue.ErrLeaseLost)
	}
	b := q.batches[batchID]
	var from driver.BatchMemberState
	if b != nil {
		from = b.members[l.JobID]
	}
	// A pending member's batch has not finished: its result is kept
	// until the batch does (fireLocked).
	if !q.endMemberLocked(e, o, reason, limit, res, from == driver.MemberPending, now) {
		return fmt.Errorf("memqueue: finishing batch member %s: outcome %s does not finish a job", l.JobID, o)
	}
	open := b != nil && b.info.CancelledAt.IsZero() && b.info.FinishedAt.IsZero()
	switch {
	case o == driver.OutcomeDone && from == driver.MemberPending && open:
		// Members before the count, so the batch is not finished
		// between a chain's steps.
		q.addMembersLocked(b, push, now)
	case o == driver.OutcomeFailed:
		for _, j := range push {
			_ = q.pushLocked(j, now) // a duplicate of its ID was pushed already
		}
	}
	if from == "" {
		return nil // not a member of a batch kept
	}
	to, ok := driver.MemberTransition(from, o)
	if !ok {
		return nil
	}
	b.members[l.JobID] = to
	b.count(from, -1)
	b.count(to, 1)
	if to == driver.MemberFailed && !b.rec.AllowFailures {
		q.cancelMembersLocked(b, now)
	}
	q.fireLocked(b, now, l.JobID, reason)
	return nil
}

// memberCancelledLocked counts e, just cancelled by Cancel, as cancelled
// in its batch if it is a pending member of one.
func (q *Queue) memberCancelledLocked(e *entry, now time.Time) {
	b := q.batches[e.job.Meta[queue.MetaBatch]]
	if b == nil || b.members[e.job.ID] != driver.MemberPending {
		return
	}
	b.members[e.job.ID] = driver.MemberCancelled
	b.info.Cancelled++
	q.fireLocked(b, now, "", "")
}

// count adds d to the counter of members in state s.
func (b *batch) count(s driver.BatchMemberState, d int) {
	switch s {
	case driver.MemberDone:
		b.info.Done += d
	case driver.MemberFailed:
		b.info.Failed += d
	case driver.MemberCancelled:
		b.info.Cancelled += d
	}
}

// cancelMembersLocked marks b cancelled and cancels its pending members.
func (q *Queue) cancelMembersLocked(b *batch, now time.Time) {
	if !b.info.CancelledAt.IsZero() || !b.info.FinishedAt.IsZero() {
		return
	}
	b.info.CancelledAt = now
	for id, s := range b.members {
		if s != driver.MemberPending {
			continue
		}
		if e := q.jobs[id]; e != nil {
			q.cancelLocked(e, now)
		}
		b.members[id] = driver.MemberCancelled
		b.info.Cancelled++
	}
}

// fireLocked pushes the callbacks b's counters make due, each once.
func (q *Queue) fireLocked(b *batch, now time.Time, failedID, reason string) {
	for _, ev := range driver.BatchDue(b.infoLocked()) {
		switch ev {
		case driver.BatchThen:
			b.info.ThenAt = now
		case driver.BatchCatch:
			b.info.CatchAt = now
		case driver.BatchFinally:
			b.info.FinishedAt = now
			for id := range b.members {
				q.releaseResultLocked(id, now)
			}
			q.retireBatchLocked(b)
		}
		j, err := b.rec.Callback(ev, failedID, reason)
		if err != nil || j == nil {
			continue // encoded by DispatchBatch: unreadable only if corrupted
		}
		_ = q.pushLocked(*j, now) // a duplicate of its ID was pushed already
	}
}

// retireBatchLocked records b, just finished, among the finished batches
// and forgets the oldest of them past maxFinishedBatches. A forgotten
// batch's place in batchList is cleared, and the list compacted once half
// of it is cleared.
func (q *Queue) retireBatchLocked(b *batch) {
	q.finishedBatches = append(q.finishedBatches, b)
	if len(q.finishedBatches) <= maxFinishedBatches {
		return
	}
	old := q.finishedBatches[0]
	q.finishedBatches = q.finishedBatches[1:]
	delete(q.batches, old.rec.ID)
	q.batchList[old.pos] = nil
	q.clearedBatches++
	if q.clearedBatches < len(q.batchList)/2 {
		return
	}
	kept := q.batchList[:0]
	for _, b := range q.batchList {
		if b != nil {
			b.pos = len(kept)
			kept = append(kept, b)
		}
	}
	clear(q.batchList[len(kept):])
	q.batchList, q.clearedBatches = kept, 0
}

// CancelBatch cancels batch id (see driver.Workflows).
func (q *Queue) CancelBatch(ctx context.Context, id string) (driver.BatchInfo, error) {
	if err := ctx.Err(); err != nil {
		return driver.BatchInfo{}, fmt.Errorf("memqueue: cancelling batch %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.batches[id]
	if b == nil {
		return driver.BatchInfo{}, fmt.Errorf("memqueue: cancelling batch %s: %w", id, queue.ErrNotFound)
	}
	now := q.now()
	q.cancelMembersLocked(b, now)
	q.fireLocked(b, now, "", "")
	return b.infoLocked(), nil
}

// GetBatch reads batch id (see driver.Workflows).
func (q *Queue) GetBatch(ctx context.Context, id string) (driver.BatchInfo, error) {
	if err := ctx.Err(); err != nil {
		return driver.BatchInfo{}, fmt.Errorf("memqueue: reading batch %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.batches[id]
	if b == nil {
		return driver.BatchInfo{}, fmt.Errorf("memqueue: reading batch %s: %w", id, queue.ErrNotFound)
	}
	return b.infoLocked(), nil
}

// ListBatches pages through the batches, newest first (see driver.Workflows).
func (q *Queue) ListBatches(ctx context.Context, f driver.BatchFilter) (driver.BatchPage, error) {
	if err := ctx.Err(); err != nil {
		return driver.BatchPage{}, fmt.Errorf("memqueue: listing batches: %w", err)
	}
	limit, err := driver.BatchLimit(f.Limit)
	if err != nil {
		return driver.BatchPage{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	i := len(q.batchList) - 1
	if f.After != "" {
		b := q.batches[f.After]
		if b == nil {
			return driver.BatchPage{}, nil
		}
		i = b.pos - 1
	}
	var page driver.BatchPage
	for ; i >= 0 && len(page.Batches) < limit; i-- {
		if b := q.batchList[i]; b != nil {
			page.Batches = append(page.Batches, b.infoLocked())
		}
	}
	if i >= 0 && len(page.Batches) > 0 {
		page.Next = page.Batches[len(page.Batches)-1].ID
	}
	return page, nil
}

// BatchMembers pages through batch id's members in job ID order (see
// driver.Workflows).
func (q *Queue) BatchMembers(ctx context.Context, id string, f driver.MemberFilter) (driver.MemberPage, error) {
	if err := ctx.Err(); err != nil {
		return driver.MemberPage{}, fmt.Errorf("memqueue: listing members of batch %s: %w", id, err)
	}
	limit, err := driver.BatchLimit(f.Limit)
	if err != nil {
		return driver.MemberPage{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.batches[id]
	if b == nil {
		return driver.MemberPage{}, fmt.Errorf("memqueue: listing members of batch %s: %w", id, queue.ErrNotFound)
	}
	var out []driver.BatchMember
	for jid, s := range b.members {
		if jid > f.After && (f.State == "" || s == f.State) {
			out = append(out, driver.BatchMember{JobID: jid, State: s})
		}
	}
	slices.SortFunc(out, func(a, b driver.BatchMember) int { return strings.Compare(a.JobID, b.JobID) })
	page := driver.MemberPage{Members: out}
	if len(out) > limit {
		page.Members = out[:limit]
		page.Next = out[limit-1].JobID
	}
	return page, nil
}

// endMemberLocked ends the leased job e of a batch member or graph node by
// outcome o, as its workflow's outcome records it: done (keeping its
// result res, pinned until its workflow finishes with pin), dead-lettered
// with reason and the attempt limit limit, or cancelled. It reports
// false, changing nothing, for an outcome that does not end a job.
func (q *Queue) endMemberLocked(e *entry, o driver.Outcome, reason string, limit int, res kept, pin bool, now time.Time) bool {
	switch o {
	case driver.OutcomeDone:
		q.finishLocked(e, now)
		q.keepResultLocked(e.job.ID, res, now, pin)
	case driver.OutcomeFailed:
		q.failLocked(e, reason, limit, now)
	case driver.OutcomeCancelled:
		q.cancelLocked(e, now)
	default:
		return false
	}
	return true
}
