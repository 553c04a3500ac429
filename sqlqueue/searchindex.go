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
}

// searchIndexerFor returns the searchIndexer of dialect name (a known one).
func searchIndexerFor(name Dialect) searchIndexer {
	switch name {
	case Postgres:
		return pgDialect{}
	case MySQL:
		return mysqlDialect{}
	}
	return sqliteDialect{}
}

// indexCandidates is how many matches after the cursor a search through
// the index reads at most: more, and the matches are common enough that
// the scan finds a page of them in its next windows.
const indexCandidates = searchRows

// EnableSearchIndex creates the payload search index of the queue's jobs
// table and fills it from the jobs it holds: on PostgreSQL a pg_trgm GIN
// index on encode(payload, 'escape') (it creates the pg_trgm extension if
// missing, which needs the right to), built CONCURRENTLY so pushes go on
// meanwhile; on SQLite an FTS5 table with the trigram tokenizer, kept
// current by triggers on the jobs table. MySQL and MariaDB have none
// (MariaDB ships no ngram full-text parser), and it returns an error
// matching queue.ErrUnsupported: a search there is the time-budgeted
// scan. It is outside the numbered migrations: Setup and Migrate never
// create or need it, and DisableSearchIndex removes it. With the index a
// search finds the same jobs as without (see ListJobs), sooner.
func (q *Queue) EnableSearchIndex(ctx context.Context) error {
	if err := searchIndexerFor(q.d.name()).enableSearch(ctx, q.db, q.t); err != nil {
		return fmt.Errorf("sqlqueue: enabling the search index of %s: %w", q.t.jobs, err)
	}
	return nil
}

// DisableSearchIndex drops the payload search index EnableSearchIndex
// created (and its triggers); with none, it changes nothing.
func (q *Queue) DisableSearchIndex(ctx context.Context) error {
	if err := searchIndexerFor(q.d.name()).disableSearch(ctx, q.db, q.t); err != nil {
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
	query, args := searchIndexerFor(q.d.name()).searchProbe(q.t)
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

// searchByIndex reads through the index the matches of f's search after
// the cursor after (match and margs: f's filter and the exact test, see
// searchCond), every one of them up to indexCandidates, and returns the
// IDs of the first n in o's order. complete is false when more than
// indexCandidates matched: the caller scans on instead.
func (q *Queue) searchByIndex(ctx context.Context, st statements, f queue.JobFilter, o listOrder, icond string, iargs []any, match string, margs []any, after *listCursor, n int) (ids []string, complete bool, err error) {
	cond, args := icond+" AND "+match, append(slices.Clip(iargs), margs...)
	if f.Queue != "" {
		cond, args = cond+" AND queue = ?", append(args, f.Queue)
	}
	if after != nil {
		c, a := o.after(*after)
		cond, args = cond+" AND "+c, append(args, a...)
	}
	query := "SELECT " + o.keyCols() + ", id FROM " + q.t.jobs + " WHERE " + cond + " LIMIT ?"
	keys, err := q.readKeys(ctx, st, q.rebind(query), append(args, indexCandidates+1), o, true)
	if err != nil || len(keys) > indexCandidates {
		return nil, false, err
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
