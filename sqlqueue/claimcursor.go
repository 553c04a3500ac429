package sqlqueue

import (
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
