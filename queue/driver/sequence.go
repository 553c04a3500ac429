package driver

import (
	"cmp"
	"context"
)

// Sequences: jobs of one sequence key (per queue) run one at a time in the
// order they were pushed, different keys in parallel (River Pro's
// sequences, Solid Queue's concurrency of one in order).
//
// A job whose Meta carries MetaSequence is a member of the sequence of its
// queue and key. A store with the Sequencer ability keeps, of each
// sequence, one job claimable: its head, the oldest member not yet
// finished. The others wait in StateSequenced, which Reserve never hands
// out, so claims of other jobs see nothing new. The head stays the head
// through everything short of an end: a retry (backoff included), a
// snooze, a lease that expires, a delay (a head scheduled in the future
// holds the members pushed after it until it runs, as River's do). The
// head leaves, and the next member becomes ready (or scheduled, at its own
// AvailableAt) in the same atomic step, when it is:
//
//   - done, cancelled (by its handler, Controller.Cancel or a bulk
//     cancel), or deleted (Purge, ForgetDead, FlushDead);
//   - dead-lettered, when its dispatch said ReleaseOnDead;
//   - a dead letter released by an operator (Sequencer.ReleaseSequence).
//
// A dead head that was not dispatched with ReleaseOnDead holds its
// sequence: nothing after it runs until an operator releases the sequence,
// retries the dead head (RetryDead, Controller.Amend: it runs again as the
// head), or deletes it. A job that left its sequence and is retried later
// (a released dead letter, a cancelled job) runs outside it.
//
// Order is push order: the order in which the pushes of a sequence's
// members committed (in one PushMany, the order of the batch). A member
// cancelled or purged while it waits leaves its place; the others keep
// theirs.

// Meta keys of sequences.
const (
	// MetaSequence names, on a sequence member, its sequence key
	// (queue.Sequence sets it).
	MetaSequence = "meridian.sequence"
	// MetaSequenceRelease is, on a member dispatched with ReleaseOnDead,
	// "dead": its dead-lettering releases the sequence.
	MetaSequenceRelease = "meridian.sequence_release"
)

// StateSequenced is the state of a sequence member waiting for the members
// pushed before it to finish. It is active: its ID is taken, Len counts
// it, Purge deletes it and Cancel cancels it.
const StateSequenced JobState = "sequenced"

// SequenceRule changes how a sequence member holds its sequence (see
// queue.Sequence).
type SequenceRule int

// The rules of a sequence member.
const (
	// ReleaseOnDead makes the member's dead-lettering release its
	// sequence, as its success would: the next member runs. Without it a
	// dead member holds the sequence until an operator releases it.
	ReleaseOnDead SequenceRule = iota + 1
)

// SequenceOf returns j's sequence key ("" for a job outside sequences) and
// whether its dead-lettering releases the sequence.
func SequenceOf(j Job) (key string, releaseOnDead bool) {
	key = j.Meta[MetaSequence]
	return key, key != "" && j.Meta[MetaSequenceRelease] == "dead"
}

// SequenceInfo is one sequence held by its dead head, as
// Sequencer.HeldSequences lists it.
type SequenceInfo struct {
	Queue string
	Key   string
	// Head is the dead letter that holds the sequence.
	Head JobInfo
	// Waiting counts the members waiting behind it (StateSequenced).
	Waiting int
}

// Sequencer is a store that keeps sequences (jobs with MetaSequence): the
// rules above, kept by every path that finishes, deletes or revives a job,
// and the operator's view of sequences held by a dead head. A store
// without it stores a member as an ordinary job; queue.Dispatch refuses a
// sequence member for a Queue that lacks it.
type Sequencer interface {
	// HeldSequences lists up to limit sequences of queue ("" for every
	// queue) whose head is a dead letter that holds them, most recently
	// dead first. A limit below 1 means 100.
	HeldSequences(ctx context.Context, queue string, limit int) ([]SequenceInfo, error)
	// ReleaseSequence releases the sequence key of queue held by its dead
	// head: the head stays a dead letter, outside the sequence from now
	// on, and the next member becomes ready, in one atomic step. It
	// returns an error matching ErrNotFound when the sequence is not held
	// by a dead head (unknown, empty, or its head is not dead).
	ReleaseSequence(ctx context.Context, queue, key string) error
}

// DefaultHeldSequences is the page HeldSequences returns for a limit
// below 1, and its most.
const DefaultHeldSequences = 100

// HeldLimit returns the limit a HeldSequences call applies for limit.
func HeldLimit(limit int) int {
	if limit < 1 || limit > DefaultHeldSequences {
		return DefaultHeldSequences
	}
	return limit
}

// sequenceKeyLimit is Validate's text for a bad sequence key.
const sequenceKeyLimit = "a sequence key (" + MetaSequence + ") of 1 to 255 bytes of UTF-8 without NUL, on a job outside groups, batches and graphs"

// checkSequence describes what is wrong with j's sequence key, or returns
// "".
func checkSequence(j Job) string {
	s, ok := j.Meta[MetaSequence]
	if !ok {
		return ""
	}
	if got := checkKey(s); got != "" || s == "" {
		return cmp.Or(got, "an empty key")
	}
	for k, what := range map[string]string{MetaGroup: "a group member", MetaBatch: "a batch member", MetaGraph: "a graph node"} {
		if _, ok := j.Meta[k]; ok {
			return what
		}
	}
	return ""
}
