package memqueue

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/meridianjobs/meridian/queue"
)

// listKey is a job's place in a ListJobs page: finished jobs (dead, done,
// cancelled) by finish time, newest first; the others in claim order.
// Its String is the page cursor.
type listKey struct {
	finished bool
	prio     int64 // claim order: the priority, highest first
	at       int64 // claim order: AvailableAt; finished: FinishedAt (Unix nanoseconds)
	seq      uint64
}

func listKeyOf(e *entry) listKey {
	switch e.state {
	case queue.StateDead, queue.StateDone, queue.StateCancelled:
		return listKey{finished: true, at: e.finishedAt().UnixNano(), seq: e.seq}
	}
	return listKey{prio: int64(e.job.Priority), at: e.avail, seq: e.seq}
}

// compare orders a before b (-1) when a comes first in the list.
func (a listKey) compare(b listKey) int {
	if a.finished != b.finished {
		return cmp.Compare(boolInt(a.finished), boolInt(b.finished))
	}
	if a.finished {
		return cmp.Or(cmp.Compare(b.at, a.at), cmp.Compare(b.seq, a.seq))
	}
	return cmp.Or(cmp.Compare(b.prio, a.prio), cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (a listKey) String() string {
	kind := "c"
	if a.finished {
		kind = "f"
	}
	return kind + strconv.FormatInt(a.prio, 36) + "." + strconv.FormatInt(a.at, 36) + "." + strconv.FormatUint(a.seq, 36)
}

func parseListKey(s string) (listKey, error) {
	var k listKey
	switch {
	case strings.HasPrefix(s, "f"):
		k.finished = true
	case !strings.HasPrefix(s, "c"):
		return k, fmt.Errorf("not a list cursor")
	}
	parts := strings.Split(s[1:], ".")
	if len(parts) != 3 {
		return k, fmt.Errorf("not a list cursor")
	}
	var err1, err2, err3 error
	k.prio, err1 = strconv.ParseInt(parts[0], 36, 64)
	k.at, err2 = strconv.ParseInt(parts[1], 36, 64)
	k.seq, err3 = strconv.ParseUint(parts[2], 36, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return k, fmt.Errorf("not a list cursor")
	}
	return k, nil
}
