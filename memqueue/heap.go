package memqueue

import (
	"math"
	"time"
)

// jobHeap is a binary min-heap of entries that keeps each entry's index up
// to date, so an entry can be removed or re-sorted in O(log n) when it is
// acked, failed or extended. It is written out rather than built on
// container/heap to avoid interface calls on the hot path.
//
// A ready heap (byTime false) orders by priority (higher first), then
// AvailableAt, then insertion. A time heap (byTime true) orders by the
// entry's at field (AvailableAt for scheduled jobs, lease expiry for running
// ones), then insertion.
type jobHeap struct {
	items  []*entry
	byTime bool
}

func (h *jobHeap) len() int { return len(h.items) }

func (h *jobHeap) less(a, b *entry) bool {
	if h.byTime {
		if a.at != b.at {
			return a.at < b.at
		}
		return a.seq < b.seq
	}
	return readyLess(a, b)
}

// readyLess reports whether ready job a is reserved before ready job b.
func readyLess(a, b *entry) bool {
	if a.job.Priority != b.job.Priority {
		return a.job.Priority > b.job.Priority
	}
	if a.avail != b.avail {
		return a.avail < b.avail
	}
	return a.seq < b.seq
}

func (h *jobHeap) push(e *entry) {
	e.idx = len(h.items)
	h.items = append(h.items, e)
	h.up(e.idx)
}

// pop removes and returns the first entry. The heap must not be empty.
func (h *jobHeap) pop() *entry {
	return h.remove(0)
}

// remove removes the entry at index i and returns it.
func (h *jobHeap) remove(i int) *entry {
	n := len(h.items) - 1
	e := h.items[i]
	if i != n {
		h.swap(i, n)
	}
	h.items[n] = nil
	h.items = h.items[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	e.idx = -1
	return e
}

// fix restores the order after the entry at index i changed its key.
func (h *jobHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// clear empties the heap and returns the entries it held.
func (h *jobHeap) clear() []*entry {
	items := h.items
	h.items = nil
	return items
}

func (h *jobHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx = i
	h.items[j].idx = j
}

func (h *jobHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *jobHeap) down(i0 int) bool {
	n := len(h.items)
	i := i0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// Bounds of the times that int64 nanoseconds since 1970 can hold.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// nanos returns t in Unix nanoseconds, clamped to the int64 range, so that
// a time past 2262 stays in the future instead of overflowing into the
// past (time.Time.UnixNano is undefined there).
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// addNanos returns n plus d, saturating instead of overflowing.
func addNanos(n int64, d time.Duration) int64 {
	if d > 0 && n > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return n + int64(d)
}
