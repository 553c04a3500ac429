package sqlqueue

import (
	"context"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// Unique keys beyond the jobs table's own index (which holds the key of an
// active job): a UniqueFor push also records the key in the uniques table
// until the hold expires, and every push of a key checks that table; a
// Replace push first deletes the waiting job holding its key. Both change
// more than one row, so a push with either runs in a write transaction
// (holdsInTx).

// holdsInTx reports whether a push of js needs a transaction of its own:
// some job takes a UniqueFor hold or replaces a waiting job.
func holdsInTx(js []queue.Job) bool {
	for _, j := range js {
		if j.UniqueKey != "" && (j.UniqueFor > 0 || j.UniqueReplace) {
			return true
		}
	}
	return false
}

// uniqueHolds is what takeUniques did for a push.
type uniqueHolds struct {
	refused []bool  // the job's key is held by a live UniqueFor hold
	taken   []int64 // expiry of the hold taken for the job, 0 for none
}

// takeUniques settles the unique keys of js before their insert: it
// deletes the waiting jobs Replace pushes displace, refuses jobs whose key
// a live UniqueFor hold keeps, and takes the holds of UniqueFor jobs. It
// returns nil when no job has a unique key.
func (q *Queue) takeUniques(ctx context.Context, ex statements, js []queue.Job, now time.Time) (*uniqueHolds, error) {
	var keys []string
	for _, j := range js {
		if j.UniqueKey != "" {
			keys = append(keys, j.UniqueKey)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	nowUS := micros(now)
	for _, j := range js {
		if j.UniqueKey == "" || !j.UniqueReplace {
			continue
		}
		// A job with a lease token is running (or was, until its lease is
		// reclaimed): it keeps its key.
		if _, err := ex.Exec(ctx, q.stmt(qReplaceWaiting), j.Queue, j.UniqueKey, j.ID); err != nil {
			return nil, err
		}
	}
	query, args, err := q.stmtIn(qUniquesHeld, keys, nowUS)
	if err != nil {
		return nil, err
	}
	rows, err := ex.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	held := make(map[[2]string]bool)
	for rows.Next() {
		var qn, k string
		if err := rows.Scan(&qn, &k); err != nil {
			rows.Close()
			return nil, err
		}
		held[[2]string{qn, k}] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	u := &uniqueHolds{refused: make([]bool, len(js)), taken: make([]int64, len(js))}
	for i, j := range js {
		if j.UniqueKey == "" {
			continue
		}
		key := [2]string{j.Queue, j.UniqueKey}
		if held[key] {
			u.refused[i] = true
			continue
		}
		if j.UniqueFor <= 0 {
			continue
		}
		if _, err := ex.Exec(ctx, q.stmt(qUniqueDeleteEnded), j.Queue, j.UniqueKey, nowUS); err != nil {
			return nil, err
		}
		until := nowUS + j.UniqueFor.Microseconds()
		n, err := ex.Exec(ctx, q.stmt(qUniqueTake), j.Queue, j.UniqueKey, until)
		if err != nil {
			return nil, err
		}
		if n == 0 { // taken by a concurrent push
			u.refused[i] = true
			continue
		}
		u.taken[i] = until
		held[key] = true // a later job of the batch with the key is refused
	}
	return u, nil
}

// releaseUniques gives back the holds takeUniques took for jobs that were
// not stored (their key was held by an active job, or their ID taken).
func (q *Queue) releaseUniques(ctx context.Context, ex statements, js []queue.Job, u *uniqueHolds, stored []bool) error {
	for i, j := range js {
		if u.taken[i] == 0 || stored[i] {
			continue
		}
		if _, err := ex.Exec(ctx, q.stmt(qUniqueRelease), j.Queue, j.UniqueKey, u.taken[i]); err != nil {
			return err
		}
	}
	return nil
}
