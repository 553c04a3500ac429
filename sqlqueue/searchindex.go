package sqlqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// searchIndexer is a dialect's payload search index: an index made for
// substring search, created by an opt-in step outside the numbered
// migrations (EnableSearchIndex; Setup never requires it). Each dialect
// implements it in its own file (dialect_<d>_search.go).
type searchIndexer interface {
	// enableSearch creates the index of the jobs table t, and whatever
	// keeps it current, filling it from the jobs already stored; it
	// returns an error matching queue.ErrUnsupported where the dialect
	// has none. Running it again when the index exists changes nothing.
	enableSearch(ctx context.Context, db DB, t tableNames) error
	// disableSearch drops what enableSearch created, if it exists.
	disableSearch(ctx context.Context, db DB, t tableNames) error
	// searchProbe is a query (? placeholders) of one row and one integer
	// column, 1 when the index exists and is usable, else 0.
	searchProbe(t tableNames) (string, []any)
	// indexedMatch is a condition on the jobs (? placeholders) that the
	// index answers and that is true of every job whose payload holds
	// search as a byte substring: it may hold for others too, since the
	// exact test (listFlavor.contains) stays in the query. ok is false
	// when the index cannot answer for search (too short, or bytes it
	// does not index), and the search is a scan.
	indexedMatch(t tableNames, search string) (cond string, args []any, ok bool)
	// pruneSearch removes what the index keeps of jobs deleted since
	// the last maintenance pass, where the dialect's index does not do
	// that in the deleting transaction, and returns how many jobs'
	// entries it removed.
	pruneSearch(ctx context.Context, q *Queue) (int, error)
}

// searchPrunedInPlace is pruneSearch of an index that the deleting
// transaction keeps current itself.
type searchPrunedInPlace struct{}

func (searchPrunedInPlace) pruneSearch(context.Context, *Queue) (int, error) { return 0, nil }

// indexCandidates is how many matches after the cursor a search through
// the index reads at most: more, and the matches are common enough that
// the scan finds a page of them in its next windows.
const indexCandidates = searchRows

// EnableSearchIndex creates the payload search index of the queue's jobs
// table and fills it from the jobs it holds: on PostgreSQL a pg_trgm GIN
// index on encode(payload, 'escape') (it creates the pg_trgm extension if
// missing, which needs the right to), built CONCURRENTLY so pushes go on
// meanwhile; on SQLite an FTS5 table with the trigram tokenizer, kept
// current by triggers on the jobs table; on MariaDB a table on its
// Mroonga engine with a bigram full-text index, written by triggers and
// pruned by Maintain (it loads the engine's plugin when the server has
// its file; see dialect_mysql_search.go). Without Mroonga (MySQL, or
// MariaDB without the plugin's package) it returns an error matching
// queue.ErrUnsupported: a search there is the time-budgeted scan. It is
// outside the numbered migrations: Setup and Migrate never
// create or need it, and DisableSearchIndex removes it. With the index a
// search finds the same jobs as without (see ListJobs), sooner.
func (q *Queue) EnableSearchIndex(ctx context.Context) error {
	if err := q.d.enableSearch(ctx, q.db, q.t); err != nil {
		return fmt.Errorf("sqlqueue: enabling the search index of %s: %w", q.t.jobs, err)
	}
	return nil
}

// DisableSearchIndex drops the payload search index EnableSearchIndex
// created (and its triggers); with none, it changes nothing.
func (q *Queue) DisableSearchIndex(ctx context.Context) error {
	if err := q.d.disableSearch(ctx, q.db, q.t); err != nil {
		return fmt.Errorf("sqlqueue: disabling the search index of %s: %w", q.t.jobs, err)
	}
	return nil
}

// SearchIndexEnabled reports whether the payload search index exists
// and is usable (on PostgreSQL, built and valid).
func (q *Queue) SearchIndexEnabled(ctx context.Context) (bool, error) {
	on, err := q.searchIndexOn(ctx, sqlStatements{q.db})
	if err != nil {
		return false, fmt.Errorf("sqlqueue: reading whether %s has a search index: %w", q.t.jobs, err)
	}
	return on, nil
}

// searchIndexOn reads whether the search index exists, on st.
func (q *Queue) searchIndexOn(ctx context.Context, st statements) (bool, error) {
	query, args := q.d.searchProbe(q.t)
	rs, err := st.Query(ctx, q.rebind(query), args...)
	if err != nil {
		return false, err
	}
	defer rs.Close()
	var on int
	for rs.Next() {
		if err := rs.Scan(&on); err != nil {
			return false, err
		}
	}
	return on == 1, rs.Err()
}

// searchByIndex reads through the index the matches of search s after
// the cursor after, every one of them up to indexCandidates, and returns
// the IDs of the first n in o's order. It reads in two statements: the
// IDs of the jobs whose payload holds s's substrings, by the index alone
// (icond and the exact tests), then those of them that f's filter (cond,
// args: see filterCond) and the cursor select, by primary key, with
// their payloads when s has field filters (tested in Go). So the
// planner has one way to the matches, the index, and is not tempted by
// an ordered index scan that filters row by row. complete is false when
// more than indexCandidates jobs hold the substrings: the caller scans on.
func (q *Queue) searchByIndex(ctx context.Context, st statements, f queue.JobFilter, s queue.Search, o listOrder, icond string, iargs []any, cond string, args []any, after *listCursor, n int) (ids []string, complete bool, err error) {
	exact, eargs := q.searchCond(icond, iargs, s.Text)
	query := "SELECT id FROM " + q.t.jobs + " WHERE " + exact + " LIMIT ?"
	rs, err := st.Query(ctx, q.rebind(query), append(eargs, indexCandidates+1)...)
	if err != nil {
		return nil, false, err
	}
	var found []any
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			rs.Close()
			return nil, false, err
		}
		found = append(found, id)
	}
	rs.Close()
	if err := rs.Err(); err != nil || len(found) > indexCandidates {
		return nil, false, err
	}
	if f.Queue != "" {
		cond, args = cond+" AND queue = ?", append(slices.Clip(args), f.Queue)
	}
	if after != nil {
		c, a := o.after(*after)
		cond, args = cond+" AND "+c, append(slices.Clip(args), a...)
	}
	cols, fields := o.keyCols()+", id", len(s.Fields) > 0
	if fields {
		cols += ", payload"
	}
	var keys []keyed
	for chunk := range slices.Chunk(found, 1000) {
		query := "SELECT " + cols + " FROM " + q.t.jobs + " WHERE id IN (" + placeholders(len(chunk)) + ") AND " + cond
		got, err := q.readKeys(ctx, st, q.rebind(query), append(slices.Clip(chunk), args...), o, true, fields)
		if err != nil {
			return nil, false, err
		}
		for _, k := range got {
			if !fields || s.Match(k.payload) {
				k.payload = nil
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b keyed) int {
		if o == byFinish {
			return cmp.Or(cmp.Compare(b.key.at, a.key.at), cmp.Compare(b.key.seq, a.key.seq))
		}
		return cmp.Or(cmp.Compare(b.key.prio, a.key.prio), cmp.Compare(a.key.at, b.key.at), cmp.Compare(a.key.seq, b.key.seq))
	})
	for _, k := range keys[:min(n, len(keys))] {
		ids = append(ids, k.id)
	}
	return ids, true, nil
}
