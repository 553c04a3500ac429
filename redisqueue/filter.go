package redisqueue

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Matching a driver.JobFilter: the jobs of one state, in ListJobs' order,
// that match the filter's queue, name, tag and payload substring. A
// jobIter examines them a chunk at a time, one listScript call per chunk
// over every queue it covers; each call seeks the sorted sets afresh from
// the last key examined (a place in the order, not a position), so jobs
// that leave the state between two chunks, or join it before that key,
// do not shift the walk. A job that comes back with a new key after it
// (retried for later, say) may be met again.
//
// The order of each state (see listPrelude):
//
//   - ready, scheduled and running: claim order (priority, then
//     available-at, then insertion), as Reserve takes them;
//   - grouped (members waiting for a gather): claim order too;
//   - sequenced (members waiting for their sequence's head): claim order too;
//   - dead: by the time they died, newest first.
//
// Done and cancelled jobs are not kept (Complete deletes them), so those
// states hold no job.

// Bounds of matching.
const (
	// chunkExamined is the most jobs one listScript call examines, so
	// that a call holds the server for a short time however many jobs a
	// search reads.
	chunkExamined = 250
	// runningCap is the most running jobs of one queue a list of running
	// jobs reads (sorting them in claim order in the script), and
	// expiredCap the most jobs of one queue whose lease expired that a
	// list of ready jobs reads: a reservation moves those back to the
	// ready set, at most promoteLimit at a time.
	runningCap = 5000
	expiredCap = promoteLimit
)

// byFinish reports whether the list of state st is ordered by finish
// time, newest first, and the suffix of the sorted set that keeps its
// jobs ("" for done and cancelled jobs, which are not kept).
func byFinish(st driver.JobState) (set string, ok bool) {
	switch st {
	case driver.StateDead:
		return ":dead", true
	case driver.StateDone, driver.StateCancelled:
		return "", true
	}
	return "", false
}

// listCursor is a position in a state's list order: the order key of the
// last job a page examined.
type listCursor struct {
	score  int64
	member string
}

// encodeCursor writes c for state st as JobPage.Next.
func encodeCursor(st driver.JobState, c listCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(st) + "|" + strconv.FormatInt(c.score, 10) + "|" + c.member))
}

// decodeCursor reads a cursor encodeCursor wrote for st, and refuses any
// other text with an error matching queue.ErrBadCursor.
func decodeCursor(st driver.JobState, s string) (listCursor, error) {
	bad := fmt.Errorf("redisqueue: listing %s jobs after %q: %w", st, s, queue.ErrBadCursor)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listCursor{}, bad
	}
	state, rest, ok1 := strings.Cut(string(raw), "|")
	score, member, ok2 := strings.Cut(rest, "|")
	n, err := strconv.ParseInt(score, 10, 64)
	if !ok1 || !ok2 || err != nil || state != string(st) || member == "" {
		return listCursor{}, bad
	}
	if _, fin := byFinish(st); !fin { // an rmember: 32 digits, then the ID
		if len(member) <= 32 || strings.Trim(member[:32], "0123456789") != "" {
			return listCursor{}, bad
		}
	}
	return listCursor{score: n, member: member}, nil
}

// jobIter walks the jobs that match a filter (see matching). Use it as
//
//	it, err := q.matching(f, scan)
//	for it.Next(ctx) {
//		j := it.Job()
//	}
//	err = it.Err()
//
// It is not safe for concurrent use.
type jobIter struct {
	q    *Queue
	f    driver.JobFilter
	kind string // listScript's kind
	fin  string // its set suffix for kind "fin"
	// scan bounds the jobs examined (0: no bound); until, when not zero,
	// is the time after which no new chunk starts once one was read.
	scan  int
	until time.Time
	// want is how many matches one chunk returns at most.
	want int

	bases []string // the queues' bases, read with the first chunk
	read1 bool     // a chunk was read
	// seek is the key the next chunk starts after: the last one
	// examined, or the filter's cursor.
	seek  *listCursor
	done  int     // jobs examined by the chunks before the current one
	chunk int     // jobs the current chunk examined
	buf   []match // its matches not yet read by Next
	ended bool    // no job is left after the current chunk
	// pos and at are where the walk is: how many jobs it has examined
	// and the key of the last of them.
	pos     int
	at      *listCursor
	cur     driver.JobInfo
	bounded bool
	err     error
}

// match is one job a chunk found, with its order key.
type match struct {
	ordinal int // its place among the chunk's examined jobs, from 1
	key     listCursor
	job     driver.JobInfo
	skip    bool // examined, not a match (asked for on a Cluster)
}

// matching returns an iterator over the jobs in f.State that match f's
// Queue, Name, Tag and Search, in ListJobs' order, from after the cursor
// f.After ("" for the start); f.Limit and f.Scan are ignored. It
// examines at most scan jobs of the state (of f.Queue, or of every
// queue), matching or not; 0 means no bound. It returns an error for an
// unknown state, and one matching queue.ErrBadCursor for a cursor no
// page of f.State gave. It does no I/O until Next.
func (q *Queue) matching(f driver.JobFilter, scan int) (*jobIter, error) {
	it := &jobIter{q: q, f: f, scan: scan, want: 100}
	switch f.State {
	case driver.StateReady:
		it.kind = "ready"
	case driver.StateScheduled:
		it.kind = "sched"
	case driver.StateRunning:
		it.kind = "run"
	case driver.StateGrouped:
		it.kind = "grouped"
	case driver.StateSequenced:
		it.kind = "sequenced"
	case driver.StateDead, driver.StateDone, driver.StateCancelled:
		it.kind = "fin"
		it.fin, _ = byFinish(f.State)
	default:
		return nil, fmt.Errorf("redisqueue: listing jobs: unknown state %q", f.State)
	}
	// The scripts test one substring; field filters, and more than one
	// substring, are not searched on Redis.
	s, err := driver.ParseSearch(f.Search)
	if err != nil {
		return nil, fmt.Errorf("redisqueue: listing jobs: %w", err)
	}
	if len(s.Fields) > 0 || len(s.Text) > 1 {
		return nil, fmt.Errorf("redisqueue: a payload search with field filters: %w", driver.ErrUnsupported)
	}
	if f.After != "" {
		c, err := decodeCursor(f.State, f.After)
		if err != nil {
			return nil, err
		}
		it.seek, it.at = &c, &c
	}
	return it, nil
}

// Next reads the next matching job, reading a chunk when it needs one. It
// returns false at the end, at the scan or time bound (Bounded then
// reports true), or on an error (Err).
func (it *jobIter) Next(ctx context.Context) bool {
	for len(it.buf) == 0 {
		if it.read1 { // the current chunk is read through: the walk is at its end
			it.done += it.chunk
			it.pos, it.at, it.chunk = it.done, it.seek, 0
		}
		if it.err != nil || it.bounded || it.ended {
			return false
		}
		budget := chunkExamined
		if it.scan > 0 {
			if it.pos >= it.scan {
				it.bounded = true
				return false
			}
			budget = min(budget, it.scan-it.pos)
		}
		if it.read1 && !it.until.IsZero() && time.Now().After(it.until) {
			it.bounded = true
			return false
		}
		if err := it.read(ctx, budget); err != nil {
			it.err = err
			return false
		}
	}
	m := it.buf[0]
	it.buf = it.buf[1:]
	it.pos, it.at, it.cur = it.done+m.ordinal, &m.key, m.job
	return true
}

// read runs one chunk of at most budget jobs examined.
func (it *jobIter) read(ctx context.Context, budget int) error {
	doing := fmt.Sprintf("listing %s jobs", it.f.State)
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	if !it.read1 {
		names, err := it.q.names(ctx, it.f.Queue)
		if err != nil {
			return wrap(doing, err)
		}
		it.bases = make([]string, len(names))
		for i, n := range names {
			it.bases[i] = it.q.base(n)
		}
	}
	it.read1 = true
	if len(it.bases) == 0 || it.kind == "fin" && it.fin == "" {
		it.ended = true
		return nil
	}
	hasc, cs, cm := "0", "0", ""
	if it.seek != nil {
		hasc, cs, cm = "1", strconv.FormatInt(it.seek.score, 10), it.seek.member
	}
	args := []any{it.kind, it.fin, hasc, cs, cm,
		it.f.Name, it.f.Tag, it.f.Search, it.want, budget, runningCap, expiredCap, "0"}
	if it.q.cluster && len(it.bases) > 1 {
		args[len(args)-1] = "1"
		return it.readMerged(ctx, doing, args, budget)
	}
	out, err := listScript.RunRO(ctx, it.q.rdb, it.bases, args...).Slice()
	if err != nil {
		return wrap(doing, err)
	}
	c, err := parseChunk(doing, out)
	if err != nil {
		return err
	}
	it.chunk, it.ended = c.examined, c.ended
	if c.last != nil {
		it.seek = c.last
	}
	it.buf = append(it.buf, c.rows...)
	return nil
}

// listChunk is one answer of listScript.
type listChunk struct {
	examined int
	ended    bool
	last     *listCursor // the key of the last job examined, if any
	rows     []match
}

// parseChunk decodes an answer of listScript.
func parseChunk(doing string, out []any) (listChunk, error) {
	var c listChunk
	if len(out) != 6 {
		return c, fmt.Errorf("redisqueue: %s: the script answered %d values, want 6", doing, len(out))
	}
	examined, _ := out[0].(int64)
	ended, _ := out[1].(int64)
	ls, _ := out[2].(string)
	lm, _ := out[3].(string)
	now, err := strconv.ParseInt(fmt.Sprint(out[4]), 10, 64)
	if err != nil {
		return c, fmt.Errorf("redisqueue: %s: the script answered the time %v", doing, out[4])
	}
	rows, _ := out[5].([]any)
	c.examined, c.ended = int(examined), ended == 1
	if lm != "" {
		n, err := strconv.ParseInt(ls, 10, 64)
		if err != nil {
			return c, fmt.Errorf("redisqueue: %s: the script answered the score %q", doing, ls)
		}
		c.last = &listCursor{score: n, member: lm}
	}
	for _, r := range rows {
		v, _ := r.([]any)
		if len(v) != 4 {
			return c, fmt.Errorf("redisqueue: %s: the script answered a match of %d values, want 4", doing, len(v))
		}
		ord, _ := v[0].(int64)
		s, _ := v[1].(string)
		m, _ := v[2].(string)
		fields, isRow := v[3].([]any)
		score, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return c, fmt.Errorf("redisqueue: %s: the script answered the score %q", doing, s)
		}
		if !isRow {
			c.rows = append(c.rows, match{ordinal: int(ord), key: listCursor{score, m}, skip: true})
			continue
		}
		ji, err := jobInfo(fields, now)
		if err != nil {
			return c, wrap(doing, err)
		}
		c.rows = append(c.rows, match{ordinal: int(ord), key: listCursor{score, m}, job: ji})
	}
	return c, nil
}

// Job returns the job the last Next read.
func (it *jobIter) Job() driver.JobInfo { return it.cur }

// Err returns the error that ended the walk, if any.
func (it *jobIter) Err() error { return it.err }

// Bounded reports whether the walk stopped at its scan or time bound
// with jobs left to examine.
func (it *jobIter) Bounded() bool { return it.bounded }

// Examined returns how many jobs the walk has examined: up to the job the
// last Next read, or, once Next returned false, all of them.
func (it *jobIter) Examined() int { return it.pos }

// Cursor returns the cursor (a JobPage.Next) that continues the walk
// after the last job it examined (see Examined); "" when it examined none
// and started from no cursor.
func (it *jobIter) Cursor() string {
	if it.at == nil {
		return ""
	}
	return encodeCursor(it.f.State, *it.at)
}
