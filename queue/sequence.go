package queue

import (
	"fmt"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Sequence makes the job a member of the sequence key among the jobs of
// its queue (River Pro's sequences): the jobs of one key run one at a
// time, in the order they were dispatched, and different keys in
// parallel. The store keeps the members after the oldest unfinished one
// in state "sequenced", never handed out, and makes the next one ready
// when the one before it finishes. A member that fails and is retried
// keeps its place (the next waits through its backoff), and so does one
// delayed (Delay, At): it holds the members dispatched after it until it
// runs. A member that is dead-lettered holds its sequence until an
// operator releases it (the dashboard, driver.Sequencer), retries it or
// deletes it; with driver.ReleaseOnDead among rules, its dead-lettering
// releases the sequence as its success would. Cancelling or deleting a
// member lets the next run.
//
// Dispatching a member to a Queue without sequences (driver.Sequencer)
// fails with an error matching ErrUnsupported; a Pusher that is not a
// Queue (a transaction's) cannot be asked, and a store without Sequencer
// stores the member through it as an ordinary job. A member may not be a
// group member, a batch member or a graph node. See
// docs/workflows.md#one-at-a-time-in-order-sequences.
func Sequence(key string, rules ...driver.SequenceRule) Option {
	return func(j *Job) {
		if j.Meta == nil {
			j.Meta = make(map[string]string, 2)
		}
		j.Meta[driver.MetaSequence] = key
		for _, r := range rules {
			if r == driver.ReleaseOnDead {
				j.Meta[driver.MetaSequenceRelease] = "dead"
			}
		}
	}
}

// checkSequence refuses a sequence member pushed to a Queue that cannot
// keep sequences.
func checkSequence(p Pusher, j *Job) error {
	key, _ := driver.SequenceOf(*j)
	if key == "" {
		return nil
	}
	if q, ok := p.(Queue); ok {
		if err := driver.CapabilitiesOf(q).Require("Sequencer"); err != nil {
			return fmt.Errorf("queue: dispatching %s to sequence %q: %w", j.Name, key, err)
		}
	}
	return nil
}
