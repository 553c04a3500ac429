package queue

import "github.com/meridianjobs/meridian/queue/driver"

// The names of the store contract (package queue/driver) that an
// application uses: the queue it holds and the jobs it dispatches and
// handles. The sentinel errors are in errors.go. Everything else a store
// implements or exchanges is in package driver.
type (
	Queue  = driver.Queue
	Pusher = driver.Pusher
	Job    = driver.Job
)

// Names a job's handler or an application reads: the default queue, the
// Job.Meta keys of chains, batches and periodic jobs, and the states of a
// job (CancelJob's answer).
const (
	DefaultQueue = driver.DefaultQueue

	// MetaChain carries, on a chain step, the steps after it and the
	// chain's catch job (JSON). The Worker reads it; users do not write it.
	MetaChain = "meridian.chain"
	// MetaChainFailed names, on a chain's catch job, the ID of the step
	// that was dead-lettered.
	MetaChainFailed = "meridian.chain_failed"
	// MetaChainError holds, on a chain's catch job, the failed step's
	// error text.
	MetaChainError = "meridian.chain_error"
	// MetaChainAfter names, on a chain step after the first, the ID of
	// the step before it, whose result it can read with ResultOf.
	MetaChainAfter = "meridian.chain_after"

	// MetaPeriodic is the key under which a periodic job's ticks, and its
	// runs started by hand (which carry no tick), carry the periodic job's
	// name.
	MetaPeriodic = driver.MetaPeriodic
	// MetaPeriodicTick is the key under which a periodic job's ticks carry
	// the tick's time (RFC 3339, UTC): the time the tick was due, which the
	// job's handler can use as "the period this run covers".
	MetaPeriodicTick = driver.MetaPeriodicTick

	// The Meta keys of batches (see driver.MetaBatch).
	MetaBatch       = driver.MetaBatch
	MetaBatchOf     = driver.MetaBatchOf
	MetaBatchEvent  = driver.MetaBatchEvent
	MetaBatchFailed = driver.MetaBatchFailed
	MetaBatchError  = driver.MetaBatchError
	StateReady      = driver.StateReady
	StateScheduled  = driver.StateScheduled
	StateRunning    = driver.StateRunning
	StateDone       = driver.StateDone
	StateDead       = driver.StateDead
	StateCancelled  = driver.StateCancelled
)
