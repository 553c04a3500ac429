package sqlqueue

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// claimSweep is how long a Queue's claims of one queue may start after a
// cursor (see claimCursors) before one reads the queue from its start
// again: the longest a claimable job behind the cursor waits while every
// claim finds as many jobs as it asks for.
const claimSweep = time.Second

// claimCursor is where the last claim of a queue ended: the claim order
// (priority, then run_at, then seq) of the last job it took.
type claimCursor struct {
	priority   int
	runAt, seq int64
	since      time.Time // when the claims started following cursors
}

// claimCursors remembers, per queue, where this Queue's last claim of it
// ended when that claim took as many jobs as it asked for. Between a
// claim's start and its end, in claim order, lie the jobs it took and
// those it read past: leased to this or another worker (claims do not
// move a job in the claim index; they lease it in place) and, until a
// vacuum or a later scan marks them dead, the entries of jobs finished
// since. A burn-down's claim read some four index entries for each job
// it took (run BA), three of them before the cursor. The next claim of
// the queue starts after the cursor instead; the jobs it skips that
// could be claimed (a lease that expired, a push whose transaction
// committed late, a job another claim held locked) are taken by the
// claim that reads from the start: the one that follows a claim short of
// its limit in the same Reserve, and the first after claimSweep.
type claimCursors struct {
	mu sync.Mutex
	m  map[string]claimCursor
}

// get returns the cursor of queue name, unless there is none or it is
// older than claimSweep at now.
func (c *claimCursors) get(name string, now time.Time) (claimCursor, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.m[name]
	if !ok || now.Sub(cur.since) >= claimSweep {
		return claimCursor{}, false
	}
	return cur, true
}

// set records the end of a claim of queue name that took as many jobs as
// it asked for: cur, its since kept from the cursor it followed, if any
// (from), else now.
func (c *claimCursors) set(name string, cur claimCursor, from *claimCursor, now time.Time) {
	cur.since = now
	if from != nil {
		cur.since = from.since
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]claimCursor)
	}
	c.m[name] = cur
}

// drop forgets the cursor of queue name: its last claim ran short, so
// the next reads from the start.
func (c *claimCursors) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}

// claimOrder orders claimed rows as claimed, the claim index's order:
// priority, highest first, then run_at as stored (dueAt), then insertion.
func claimOrder(a, b row) int {
	return cmp.Or(cmp.Compare(b.job.Priority, a.job.Priority), cmp.Compare(a.dueAt, b.dueAt), cmp.Compare(a.seq, b.seq))
}

// cursorAt returns the cursor at the last of rows in claim order.
func cursorAt(rows []row) claimCursor {
	last := slices.MaxFunc(rows, claimOrder)
	return claimCursor{priority: last.job.Priority, runAt: last.dueAt, seq: last.seq}
}

// settle records where a claim of queues that asked for max jobs and took
// rows ended: a cursor when it took max from one queue, else none.
func (c *claimCursors) settle(queues []string, max int, rows []row, from *claimCursor, now time.Time) {
	if len(queues) != 1 {
		return
	}
	if len(rows) < max {
		c.drop(queues[0])
		return
	}
	c.set(queues[0], cursorAt(rows), from, now)
}

// follow returns the cursor a claim of queues starts after, or nil: only
// a claim of one queue follows one.
func (c *claimCursors) follow(queues []string, now time.Time) *claimCursor {
	if len(queues) != 1 {
		return nil
	}
	if cur, ok := c.get(queues[0], now); ok {
		return &cur
	}
	return nil
}
