package redisqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// promoteLimit bounds how many due scheduled jobs, and how many jobs whose
// lease expired, one reservation moves to ready, so that a script stays
// short however many came due at once; the next reservation moves more.
const promoteLimit = 1000

var defaultQueues = []string{queue.DefaultQueue}

// Reserve leases up to max ready jobs from queues (see queue.Queue): one
// script per queue. From several queues it first reads each queue's best
// max, then leases from each queue as many as the merged order takes
// from it, and returns them in that order. On a Cluster a queue whose
// node fails (its master down, before a replica is promoted) is left out
// with a warning in the Queue's logger, and the others are reserved from;
// the call fails only when every queue's does. A max below 1 reserves
// nothing.
func (q *Queue) Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, claimCount{fresh: 1, recovered: 1})
}

// ReserveUnstarted is Reserve without counting the attempt: Complete's
// starts count it (see queue.Queue).
func (q *Queue) ReserveUnstarted(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, claimCount{})
}

// ReserveStarting is Reserve counting the attempts of the jobs it hands
// out fresh and not of those taken back from an expired lease (see
// queue.Queue): the script tells them apart by the job's recovered mark.
func (q *Queue) ReserveStarting(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	return q.reserve(ctx, queues, max, lease, claimCount{fresh: 1})
}

// claimCount is what a reservation adds to the attempts of the jobs it
// takes: fresh to a job with no lease before it, recovered to one taken
// back from an expired lease (queue.Job.Recovered).
type claimCount struct{ fresh, recovered int }

func (q *Queue) reserve(ctx context.Context, queues []string, max int, lease time.Duration, inc claimCount) ([]queue.Job, error) {
	const doing = "reserving jobs"
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, nil
	}
	if len(queues) == 0 {
		queues = defaultQueues
	}
	queues = distinct(queues)
	q.sweep(ctx, queues)
	leaseMs := lease.Milliseconds()
	if len(queues) == 1 {
		jobs, err := q.reserveFrom(ctx, queues[0], max, leaseMs, inc)
		return jobs, wrap(doing, err)
	}
	// Read each queue's best max (moving due jobs to ready), merge, and
	// take from each queue its share of the merged best max.
	type cand struct {
		score  float64
		member string
		queue  int
	}
	var cands []cand
	// On a Cluster each queue is served by its slot's master: a queue whose
	// master does not answer is left out (and logged), and the others are
	// reserved from; only when no queue answers does Reserve fail.
	var failed []error
	skip := func(name string, err error) bool {
		if !q.cluster || ctx.Err() != nil {
			return false
		}
		q.log.Warn("redisqueue: a queue's Cluster node failed; reserving from the other queues", "queue", name, "err", err)
		failed = append(failed, fmt.Errorf("queue %s: %w", name, err))
		return true
	}
	for i, name := range queues {
		out, err := reserveScript.Run(ctx, q.rdb, []string{q.base(name)}, max, 0, "", "", 0, promoteLimit, "peek", 0).Slice()
		if err != nil {
			if skip(name, err) {
				continue
			}
			return nil, wrap(doing, err)
		}
		for k := 0; k+1 < len(out); k += 2 {
			m, _ := out[k].(string)
			s, _ := strconv.ParseFloat(fmt.Sprint(out[k+1]), 64)
			cands = append(cands, cand{s, m, i})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.score, b.score), strings.Compare(a.member[:min(32, len(a.member))], b.member[:min(32, len(b.member))]), cmp.Compare(a.queue, b.queue))
	})
	share := make([]int, len(queues))
	for _, c := range cands[:min(max, len(cands))] {
		share[c.queue]++
	}
	var jobs []queue.Job
	for i, name := range queues {
		if share[i] == 0 {
			continue
		}
		got, err := q.reserveFrom(ctx, name, share[i], leaseMs, inc)
		if err != nil {
			if skip(name, err) {
				continue
			}
			// The jobs leased so far stay leased until their leases end.
			return jobs, wrap(doing, err)
		}
		jobs = append(jobs, got...)
	}
	if len(failed) == len(queues) {
		return nil, wrap(doing, errors.Join(failed...))
	}
	slices.SortStableFunc(jobs, func(a, b queue.Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.AvailableAt.Compare(b.AvailableAt))
	})
	return jobs, nil
}

// reserveFrom runs reserveScript on one queue.
func (q *Queue) reserveFrom(ctx context.Context, name string, n int, leaseMs int64, inc claimCount) ([]queue.Job, error) {
	head := driver.NewToken() + "."
	out, err := reserveScript.Run(ctx, q.rdb, []string{q.base(name)}, n, leaseMs, head, ":"+name, inc.fresh, promoteLimit, "", inc.recovered).Slice()
	if err != nil {
		return nil, err
	}
	jobs := make([]queue.Job, 0, len(out))
	for _, row := range out {
		vals, _ := row.([]any)
		j, err := decodeJob(vals)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func distinct(s []string) []string {
	for i := 1; i < len(s); i++ {
		if slices.Contains(s[:i], s[i]) {
			out := slices.Clone(s[:i])
			for _, v := range s[i:] {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
			return out
		}
	}
	return s
}

// The fields of a job's hash, in the order of the scripts' JF.
const (
	fID = iota
	fQueue
	fName
	fPayload
	fPriority
	fAttempts
	fMaxAttempts
	fTimeout
	fUniqueKey
	fTags
	fMeta
	fAvail
	fCreated
	fLastError
	fToken
	fExpires
	fSnoozes
	fRecovered
	fRetryUntil
	nFields
)

// decodeJob reads a job from the values of HMGET jobKey JF...
func decodeJob(v []any) (queue.Job, error) {
	if len(v) != nFields {
		return queue.Job{}, fmt.Errorf("a job read back with %d fields, want %d", len(v), nFields)
	}
	s := func(i int) string { x, _ := v[i].(string); return x }
	n := func(i int) int64 { x, _ := strconv.ParseInt(s(i), 10, 64); return x }
	t := func(i int) time.Time {
		if s(i) == "" {
			return time.Time{}
		}
		return time.UnixMilli(n(i))
	}
	j := queue.Job{
		ID:             s(fID),
		Queue:          s(fQueue),
		Name:           s(fName),
		Priority:       int(n(fPriority)),
		Attempts:       int(n(fAttempts)),
		MaxAttempts:    int(n(fMaxAttempts)),
		Timeout:        time.Duration(n(fTimeout)),
		UniqueKey:      s(fUniqueKey),
		AvailableAt:    t(fAvail),
		CreatedAt:      t(fCreated),
		LastError:      s(fLastError),
		LeaseToken:     s(fToken),
		LeaseExpiresAt: t(fExpires),
		Snoozes:        int(n(fSnoozes)),
		Recovered:      s(fRecovered) == "1",
		RetryUntil:     t(fRetryUntil),
	}
	if p := s(fPayload); p != "" {
		j.Payload = []byte(p)
	}
	if tg := s(fTags); tg != "" {
		if err := json.Unmarshal([]byte(tg), &j.Tags); err != nil {
			return j, fmt.Errorf("decoding the tags of job %s: %w", j.ID, err)
		}
	}
	if md := s(fMeta); md != "" {
		if err := json.Unmarshal([]byte(md), &j.Meta); err != nil {
			return j, fmt.Errorf("decoding the meta of job %s: %w", j.ID, err)
		}
	}
	return j, nil
}

// leaseQueue returns the queue a lease token names: Reserve's tokens end
// with ":" and the job's queue. ok is false for a token no Reserve of this
// driver gave, which is never current.
func leaseQueue(token string) (name string, ok bool) {
	_, name, ok = strings.Cut(token, ":")
	return name, ok
}

func lostErr(doing string) error {
	return fmt.Errorf("redisqueue: %s: %w", doing, queue.ErrLeaseLost)
}

// Complete counts the attempts of the jobs under starts and records each
// outcome of outs (see queue.Queue.Complete), all in one script: every
// outcome with its pushes, together or not at all. A batch member's
// outcome (Completion.Batch) reaches its batch in the steps of
// scripts_batch.go, and a graph node's (Completion.Graph) its graph in
// those of scripts_graph.go, run before Complete returns; should they fail after
// the outcome was recorded, the outcome stands (its error is nil) and a
// later reservation from the queue finishes them (docs/drivers.md). So
// does a push into another queue than the job's (chain.go).
//
// On a Cluster it runs one script per queue (cluster.go), so the outcomes
// of one queue are recorded together, and an error may come after some
// queues' were recorded (their leases are then gone: a retry of those
// reports queue.ErrLeaseLost).
func (q *Queue) Complete(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	if !q.cluster {
		return q.completeIn(ctx, starts, outs)
	}
	nameOf := func(tok string) string { n, _ := leaseQueue(tok); return n }
	sn, sg := byQueue(len(starts), func(i int) string { return nameOf(starts[i].Token) })
	on, og := byQueue(len(outs), func(i int) string { return nameOf(outs[i].Lease.Token) })
	var lost []driver.Lease
	errs := make([]error, len(outs))
	for _, n := range sortedNames(append(sn, on...)) {
		ps := make([]driver.Lease, len(sg[n]))
		for k, i := range sg[n] {
			ps[k] = starts[i]
		}
		po := make([]driver.Completion, len(og[n]))
		for k, i := range og[n] {
			po[k] = outs[i]
		}
		l, e, err := q.completeIn(ctx, ps, po)
		if err != nil {
			return nil, nil, err
		}
		lost = append(lost, l...)
		for k, i := range og[n] {
			errs[i] = e[k]
		}
	}
	return lost, errs, nil
}

// completeIn is Complete in one script: on a Cluster, of the leases of
// one queue.
func (q *Queue) completeIn(ctx context.Context, starts []driver.Lease, outs []driver.Completion) ([]driver.Lease, []error, error) {
	doing := fmt.Sprintf("completing %d jobs", len(starts)+len(outs))
	if err := ctxErr(ctx, doing); err != nil {
		return nil, nil, err
	}
	var lostStarts []driver.Lease
	errs := make([]error, len(outs))
	ks := newKeyset(q.ids, q.queues)
	if q.cluster {
		var name string
		if len(starts) > 0 {
			name, _ = leaseQueue(starts[0].Token)
		} else if len(outs) > 0 {
			name, _ = leaseQueue(outs[0].Lease.Token)
		}
		b := q.base(name)
		ks = newKeyset(q.idsKey(b), q.qsetKey(b))
	}
	args := []any{q.wake, 0}
	var sent []int // the starts sent, by index
	for i, l := range starts {
		name, ok := leaseQueue(l.Token)
		if !ok {
			lostStarts = append(lostStarts, l)
			continue
		}
		args = append(args, ks.of(q.base(name)), l.JobID, l.Token)
		sent = append(sent, i)
	}
	args[1] = len(sent)
	nAt := len(args)
	args = append(args, 0)
	var sentOuts []int
	crosses := make([]bool, len(outs)) // a push of outs[i] goes to another queue
	for i, o := range outs {
		name, ok := leaseQueue(o.Lease.Token)
		if !ok {
			errs[i] = lostErr("completing job " + o.Lease.JobID)
			continue
		}
		push := o.Push
		if o.Outcome != driver.OutcomeDone && o.Outcome != driver.OutcomeFailed {
			push = nil
		}
		if err := driver.ValidateBatch(push); err != nil {
			errs[i] = err
			continue
		}
		var at string
		if !o.At.IsZero() {
			at = strconv.FormatInt(millis(o.At), 10)
		}
		// The script's counted slot: a snooze's Counted, a dead
		// letter's attempt limit.
		counted := "0"
		switch {
		case o.Outcome == driver.OutcomeFailed && o.MaxAttempts > 0:
			counted = strconv.Itoa(o.MaxAttempts)
		case o.Counted:
			counted = "1"
		}
		var res, rexp string
		if o.Result != nil && o.Outcome == driver.OutcomeDone {
			res, rexp = string(o.Result), strconv.FormatInt(millis(o.ResultUntil), 10)
		}
		rel := "0"
		if o.ReleaseOnDead {
			rel = "1"
		}
		args = append(args, ks.of(q.base(name)), o.Lease.JobID, o.Lease.Token, int(o.Outcome), at, o.Reason, counted, o.Batch, res, rexp,
			o.Sequence, rel, o.Graph, len(push))
		for _, p := range push {
			if p.ID == "" {
				p.ID = driver.NewID()
			}
			cross := q.base(p.QueueName()) != q.base(name)
			crosses[i] = crosses[i] || cross
			var err error
			// A batch member's done pushes ride in its outbox event
			// (completeScript): no key of theirs is named.
			if cross || (o.Batch != "" && o.Outcome == driver.OutcomeDone) {
				args, err = q.pushArgsAt(args, 0, &p)
			} else {
				args, err = q.pushArgs(args, ks, &p)
			}
			if err != nil {
				return nil, nil, wrap(doing, err)
			}
		}
		sentOuts = append(sentOuts, i)
	}
	args[nAt] = len(sentOuts)
	if len(sent) == 0 && len(sentOuts) == 0 {
		return lostStarts, errs, nil
	}
	out, err := completeScript.Run(ctx, q.rdb, ks.keys, args...).Slice()
	if err != nil {
		return nil, nil, wrap(doing, err)
	}
	if len(out) != 2 {
		return nil, nil, fmt.Errorf("redisqueue: %s: the script answered %d values, want 2", doing, len(out))
	}
	lost, _ := out[0].([]any)
	for _, x := range lost {
		k, _ := x.(int64)
		if k >= 1 && int(k) <= len(sent) {
			lostStarts = append(lostStarts, starts[sent[k-1]])
		}
	}
	codes, _ := out[1].([]any)
	if len(codes) != len(sentOuts) {
		return nil, nil, fmt.Errorf("redisqueue: %s: the script answered %d outcomes of %d", doing, len(codes), len(sentOuts))
	}
	var noted []string // the queues whose outbox got a batch member's or graph node's event
	for k, x := range codes {
		i := sentOuts[k]
		switch c, _ := x.(int64); c {
		case 1:
			if outs[i].Batch != "" || outs[i].Graph != "" || crosses[i] {
				name, _ := leaseQueue(outs[i].Lease.Token)
				noted = append(noted, name)
			}
		case 0:
			errs[i] = lostErr("completing job " + outs[i].Lease.JobID)
		default:
			errs[i] = fmt.Errorf("redisqueue: completing job %s: unknown outcome %d", outs[i].Lease.JobID, outs[i].Outcome)
		}
	}
	if len(noted) > 0 {
		q.settleLogged(ctx, distinct(noted))
	}
	return lostStarts, errs, nil
}

// ExtendMany sets the expiry of every current lease of leases to now plus
// d in one script and returns the others (see queue.Queue).
func (q *Queue) ExtendMany(ctx context.Context, leases []driver.Lease, d time.Duration) ([]driver.Lease, error) {
	doing := fmt.Sprintf("extending %d leases", len(leases))
	if err := ctxErr(ctx, doing); err != nil {
		return nil, err
	}
	if q.cluster {
		names, groups := byQueue(len(leases), func(i int) string { n, _ := leaseQueue(leases[i].Token); return n })
		if len(names) > 1 {
			var lost []driver.Lease
			for _, n := range names {
				part := make([]driver.Lease, len(groups[n]))
				for k, i := range groups[n] {
					part[k] = leases[i]
				}
				l, err := q.ExtendMany(ctx, part, d)
				if err != nil {
					return nil, err
				}
				lost = append(lost, l...)
			}
			return lost, nil
		}
	}
	var lost []driver.Lease
	ks := newKeyset()
	args := []any{d.Milliseconds()}
	var sent []int
	for i, l := range leases {
		name, ok := leaseQueue(l.Token)
		if !ok {
			lost = append(lost, l)
			continue
		}
		args = append(args, ks.of(q.base(name)), l.JobID, l.Token)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return lost, nil
	}
	out, err := extendScript.Run(ctx, q.rdb, ks.keys, args...).Slice()
	if err != nil {
		return nil, wrap(doing, err)
	}
	for _, x := range out {
		k, _ := x.(int64)
		if k >= 1 && int(k) <= len(sent) {
			lost = append(lost, leases[sent[k-1]])
		}
	}
	return lost, nil
}
