package queue

import "sync"

// ackQueue is where executors leave acks and start marks for the ack
// flushers: a slice under a mutex that a flusher empties a batch at a time,
// rather than a channel, whose lock every item took twice (its send and its
// receive) while 1,000 executors and two flushers contended for it. Only
// the wake-ups are channels, so that a flusher or an executor waiting here
// is durably blocked (testing/synctest).
type ackQueue struct {
	max int // items at which put waits for a flusher to take some

	mu     sync.Mutex
	items  []ackItem
	closed bool
	// taken, while a put waits for room, is closed (and cleared) when a
	// flusher takes items.
	taken chan struct{}

	ready chan struct{} // holds a token while items may wait for a flusher
	shut  chan struct{} // closed by close
}

func newAckQueue(max int) *ackQueue {
	return &ackQueue{max: max, ready: make(chan struct{}, 1), shut: make(chan struct{})}
}

// put queues it, waiting while the queue holds max items. It reports false,
// queueing nothing, once the queue is closed.
func (q *ackQueue) put(it ackItem) bool {
	q.mu.Lock()
	for len(q.items) >= q.max && !q.closed {
		if q.taken == nil {
			q.taken = make(chan struct{})
		}
		taken := q.taken
		q.mu.Unlock()
		<-taken
		q.mu.Lock()
	}
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	q.signal()
	return true
}

// signal leaves a token in ready unless one is there.
func (q *ackQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take moves up to n queued items, oldest first, into b and reports how
// many; open is false once the queue is closed and holds nothing more.
func (q *ackQueue) take(b *ackBatch, n int) (took int, open bool) {
	q.mu.Lock()
	k := min(n, len(q.items))
	for _, it := range q.items[:k] {
		b.add(it)
	}
	rest := copy(q.items, q.items[k:])
	clear(q.items[rest:]) // let the jobs taken be collected once flushed
	q.items = q.items[:rest]
	if k > 0 && q.taken != nil {
		close(q.taken)
		q.taken = nil
	}
	open = !q.closed || rest > 0
	q.mu.Unlock()
	if rest > 0 {
		q.signal() // for the next gather
	}
	return k, open
}

// len reports how many items wait.
func (q *ackQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// close makes later puts fail and wakes every waiter; the items queued
// stay for the flushers to take.
func (q *ackQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	close(q.shut)
	if q.taken != nil {
		close(q.taken)
		q.taken = nil
	}
}
