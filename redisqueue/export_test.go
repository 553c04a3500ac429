package redisqueue

import "time"

// SetBatchHook makes q run hook at the end of each step of the batch
// protocol (scripts_batch.go); an error stops the protocol there, as a
// process killed at that point would.
func SetBatchHook(q *Queue, hook func(step string) error) { q.batchSweep.hook = hook }

// SetSweepEvery sets how often q's reservations look in a queue's outbox.
func SetSweepEvery(q *Queue, d time.Duration) { q.batchSweep.every = d }
