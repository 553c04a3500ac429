package memqueue

// Waiting reports whether a Wait is blocked on queueName of q: from then
// on the next push, nack, retry or resume there wakes it.
func Waiting(q *Queue, queueName string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	nq, ok := q.queues[queueName]
	return ok && nq.wake != nil
}
