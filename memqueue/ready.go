package memqueue

import "slices"

// readyQueue holds a named queue's ready jobs in reservation order:
// priority (higher first), then AvailableAt, then insertion.
//
// Most jobs arrive in order within their priority: a push available now
// has a later AvailableAt and a later sequence number than every ready job
// before it. Those go to a FIFO lane per priority, where push and pop cost
// O(1) without touching the rest of the queue (a heap of a million jobs
// costs a cache miss per level on every pop). Jobs that arrive out of
// order (a delayed job coming due, an expired lease, a revived dead
// letter) go to a heap. The next job is the better of the highest
// non-empty lane's head and the heap's top.
type readyQueue struct {
	lanes []lane // by priority, highest first
	heap  jobHeap
	n     int
}

// lane is a FIFO of ready jobs of one priority, sorted by AvailableAt and
// then insertion. items[head:] are the queued jobs.
type lane struct {
	priority int
	items    []*entry
	head     int
}

// maxLanes bounds the lanes kept. A queue that uses more distinct
// priorities than this sends the jobs of the rest to the heap.
const maxLanes = 16

// before reports whether a comes before b within one priority.
func before(a, b *entry) bool {
	if a.avail != b.avail {
		return a.avail < b.avail
	}
	return a.seq < b.seq
}

func (r *readyQueue) len() int { return r.n }

func (r *readyQueue) push(e *entry) {
	r.n++
	p := e.job.Priority
	i := r.laneIndex(p)
	if i < len(r.lanes) && r.lanes[i].priority == p {
		l := &r.lanes[i]
		if l.head == len(l.items) || !before(e, l.items[len(l.items)-1]) {
			l.items = append(l.items, e)
			return
		}
		r.heap.push(e)
		return
	}
	if len(r.lanes) >= maxLanes {
		r.pruneLanes()
		if len(r.lanes) >= maxLanes {
			r.heap.push(e)
			return
		}
		i = r.laneIndex(p)
	}
	r.lanes = append(r.lanes, lane{})
	copy(r.lanes[i+1:], r.lanes[i:])
	r.lanes[i] = lane{priority: p, items: []*entry{e}}
}

// laneIndex returns the index of the lane of priority p, or where it
// would be inserted.
func (r *readyQueue) laneIndex(p int) int {
	i := 0
	for i < len(r.lanes) && r.lanes[i].priority > p {
		i++
	}
	return i
}

// pruneLanes drops empty lanes.
func (r *readyQueue) pruneLanes() {
	kept := r.lanes[:0]
	for _, l := range r.lanes {
		if l.head < len(l.items) {
			kept = append(kept, l)
		}
	}
	clear(r.lanes[len(kept):])
	r.lanes = kept
}

// bestLane returns the highest non-empty lane, or nil.
func (r *readyQueue) bestLane() *lane {
	for i := range r.lanes {
		if l := &r.lanes[i]; l.head < len(l.items) {
			return l
		}
	}
	return nil
}

// peek returns the next job without removing it, or nil.
func (r *readyQueue) peek() *entry {
	var best *entry
	if l := r.bestLane(); l != nil {
		best = l.items[l.head]
	}
	if r.heap.len() > 0 {
		if top := r.heap.items[0]; best == nil || r.heap.less(top, best) {
			best = top
		}
	}
	return best
}

// pop removes and returns the next job. The queue must not be empty.
func (r *readyQueue) pop() *entry {
	r.n--
	l := r.bestLane()
	if r.heap.len() > 0 && (l == nil || r.heap.less(r.heap.items[0], l.items[l.head])) {
		return r.heap.pop()
	}
	e := l.items[l.head]
	l.items[l.head] = nil
	l.head++
	switch {
	case l.head == len(l.items):
		l.items = l.items[:0]
		l.head = 0
	case l.head >= 1024 && 2*l.head >= len(l.items):
		k := copy(l.items, l.items[l.head:])
		clear(l.items[k:])
		l.items = l.items[:k]
		l.head = 0
	}
	return e
}

// each calls fn for every ready job, in no particular order.
func (r *readyQueue) each(fn func(*entry)) {
	for _, l := range r.lanes {
		for _, e := range l.items[l.head:] {
			fn(e)
		}
	}
	for _, e := range r.heap.items {
		fn(e)
	}
}

// clear empties the queue and returns the jobs it held.
func (r *readyQueue) clear() []*entry {
	out := make([]*entry, 0, r.n)
	r.each(func(e *entry) { out = append(out, e) })
	r.lanes = nil
	r.heap.clear()
	r.n = 0
	return out
}

// remove takes e, which must be queued here, out of the queue. It costs a
// search of e's lane (sorted, so a binary search) and a shift: it serves
// cancels and replacements, not the claim path.
func (r *readyQueue) remove(e *entry) {
	r.n--
	if e.idx >= 0 && e.idx < r.heap.len() && r.heap.items[e.idx] == e {
		r.heap.remove(e.idx)
		return
	}
	i := r.laneIndex(e.job.Priority)
	l := &r.lanes[i]
	q := l.items[l.head:]
	k, _ := slices.BinarySearchFunc(q, e, func(a, b *entry) int {
		switch {
		case a == b:
			return 0
		case before(a, b):
			return -1
		}
		return 1
	})
	copy(q[k:], q[k+1:])
	q[len(q)-1] = nil
	l.items = l.items[:len(l.items)-1]
}
