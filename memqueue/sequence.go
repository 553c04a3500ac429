package memqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// sequence holds the members of one sequence (one key of one queue) that
// hold a place in it, in push order: members[0] is the head (ready,
// scheduled, running or a dead letter holding it), the others wait in
// StateSequenced.
type sequence struct {
	key     string
	members []*entry
}

// sequenceLocked seats e, a new member of the sequence key, at the end of
// its sequence, or at seat when it takes the place of the job it replaces
// (seat.s non-nil). It reports whether e waits (StateSequenced) rather
// than being the head, which the caller enqueues.
func (q *Queue) sequenceLocked(e *entry, key string, seat seat) (waits bool) {
	if seat.s != nil {
		seat.s.members[seat.i] = e
		if seat.i > 0 {
			e.state = driver.StateSequenced
			return true
		}
		return false
	}
	nq := e.nq
	if nq.seqs == nil {
		nq.seqs = make(map[string]*sequence)
	}
	s := nq.seqs[key]
	if s == nil {
		s = &sequence{key: key}
		nq.seqs[key] = s
	}
	s.members = append(s.members, e)
	if len(s.members) > 1 {
		e.state = driver.StateSequenced
		return true
	}
	return false
}

// seat is a place in a sequence: members[i] of s.
type seat struct {
	s *sequence
	i int
}

// seatOfLocked returns e's place in its sequence (s nil when it holds
// none: outside sequences, or it left its sequence).
func (q *Queue) seatOfLocked(e *entry) seat {
	key := e.job.Meta[driver.MetaSequence]
	if key == "" {
		return seat{}
	}
	s := e.nq.seqs[key]
	if s == nil {
		return seat{}
	}
	if len(s.members) > 0 && s.members[0] == e {
		return seat{s, 0}
	}
	if i := slices.Index(s.members, e); i >= 0 {
		return seat{s, i}
	}
	return seat{}
}

// reseatLocked returns the place that j, pushed with old's ID, takes from
// old: old's own when both are members of one sequence (a retried dead
// head runs again as the head). Otherwise old leaves its sequence and no
// place is kept.
func (q *Queue) reseatLocked(old *entry, j queue.Job, nq *namedQueue) seat {
	st := q.seatOfLocked(old)
	if st.s == nil {
		return seat{}
	}
	if old.nq == nq && j.Meta[driver.MetaSequence] == st.s.key {
		return st
	}
	q.leaveSequenceLocked(old)
	return seat{}
}

// leaveSequenceLocked takes e out of its sequence, if it holds a place
// there: finished, deleted, dead with ReleaseOnDead, or released. When e
// was the head, the next member becomes ready (or scheduled, at its
// AvailableAt).
func (q *Queue) leaveSequenceLocked(e *entry) {
	st := q.seatOfLocked(e)
	if st.s == nil {
		return
	}
	s := st.s
	s.members = slices.Delete(s.members, st.i, st.i+1)
	if len(s.members) == 0 {
		delete(e.nq.seqs, s.key)
		return
	}
	if next := s.members[0]; st.i == 0 && next.state == driver.StateSequenced {
		q.enqueueLocked(next, q.now().UnixNano())
	}
}

// sequenced returns how many members wait in nq's sequences.
func (nq *namedQueue) sequenced() int {
	n := 0
	for _, s := range nq.seqs {
		for _, e := range s.members {
			if e.state == driver.StateSequenced {
				n++
			}
		}
	}
	return n
}

// purgeSequencedLocked deletes every waiting member of nq's sequences and
// reports how many (Purge).
func (q *Queue) purgeSequencedLocked(nq *namedQueue) int {
	n := 0
	for key, s := range nq.seqs {
		s.members = slices.DeleteFunc(s.members, func(e *entry) bool {
			if e.state != driver.StateSequenced {
				return false
			}
			delete(q.jobs, e.job.ID)
			e.state = ""
			n++
			return true
		})
		if len(s.members) == 0 {
			delete(nq.seqs, key)
		}
	}
	return n
}

// HeldSequences lists the sequences whose head is a dead letter holding
// them, most recently dead first (see driver.Sequencer).
func (q *Queue) HeldSequences(ctx context.Context, queueName string, limit int) ([]driver.SequenceInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memqueue: listing held sequences: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var held []*sequence
	for _, nq := range q.selectQueuesLocked(queueName) {
		for _, s := range nq.seqs {
			if s.members[0].state == queue.StateDead {
				held = append(held, s)
			}
		}
	}
	slices.SortFunc(held, func(a, b *sequence) int {
		return cmp.Compare(b.members[0].deathSeq, a.members[0].deathSeq)
	})
	held = held[:min(len(held), driver.HeldLimit(limit))]
	out := make([]driver.SequenceInfo, len(held))
	for i, s := range held {
		h := s.members[0]
		out[i] = driver.SequenceInfo{Queue: h.nq.name, Key: s.key, Head: h.info(), Waiting: len(s.members) - 1}
	}
	return out, nil
}

// ReleaseSequence releases the sequence key of queueName held by its dead
// head (see driver.Sequencer).
func (q *Queue) ReleaseSequence(ctx context.Context, queueName, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: releasing sequence %s: %w", key, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var s *sequence
	if nq := q.queues[cmp.Or(queueName, queue.DefaultQueue)]; nq != nil {
		s = nq.seqs[key]
	}
	if s == nil || s.members[0].state != queue.StateDead {
		return fmt.Errorf("memqueue: releasing sequence %s of queue %s: %w", key, queueName, queue.ErrNotFound)
	}
	q.leaveSequenceLocked(s.members[0])
	return nil
}

var _ driver.Sequencer = (*Queue)(nil)
