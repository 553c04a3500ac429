package sqlqueue

import (
	"context"
	"strings"
	"unicode/utf8"
)

// SQLite's payload search index (see searchIndexer): a contentless FTS5
// table <table>_search with the trigram tokenizer (case-sensitive), one
// row per job (its rowid the job's seq) holding the payload read as text,
// kept current by triggers on the jobs table, since the queue writes jobs
// itself. The tokenizer reads UTF-8 leniently: a lead byte takes the
// continuation bytes that follow it, and any other byte is a character of
// its own. So a search that is valid UTF-8 decodes inside any payload
// that holds it to the same characters, except that its last character
// may take stray continuation bytes that follow it in the payload: the
// index is asked for the search less its last character, as a phrase
// (the trigrams in a row), which every match holds, and the exact byte
// test stays in the query. A search the index cannot answer, and which
// is a scan, is one of fewer than four characters (three for the phrase,
// the trigram tokenizer's least), or one that is not valid UTF-8 or
// holds a NUL byte.

// sqliteSearchNames are the FTS5 table's name and its triggers' for the
// jobs table t.
func sqliteSearchNames(t tableNames) (fts, onInsert, onDelete, onUpdate string) {
	q := sqliteDialect{}.quote
	return q(t.raw + "_search"), q(t.raw + "_search_ins"), q(t.raw + "_search_del"), q(t.raw + "_search_upd")
}

func (sqliteDialect) enableSearch(ctx context.Context, db DB, t tableNames) error {
	fts, ins, del, upd := sqliteSearchNames(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	probe, args := sqliteDialect{}.searchProbe(t)
	var on int
	if err := tx.QueryRowContext(ctx, probe, args...).Scan(&on); err != nil {
		return err
	}
	if on == 1 {
		return nil
	}
	// A part without the rest (the triggers go with a jobs table a
	// migration rebuilt) is stale: build it all again.
	for _, s := range append(sqliteSearchDrops(t), []string{
		"CREATE VIRTUAL TABLE " + fts + " USING fts5(body, tokenize = 'trigram case_sensitive 1', content = '', contentless_delete = 1)",
		"CREATE TRIGGER " + ins + " AFTER INSERT ON " + t.jobs + " BEGIN INSERT INTO " + fts + " (rowid, body) VALUES (new.seq, CAST(new.payload AS TEXT)); END",
		"CREATE TRIGGER " + del + " AFTER DELETE ON " + t.jobs + " BEGIN DELETE FROM " + fts + " WHERE rowid = old.seq; END",
		"CREATE TRIGGER " + upd + " AFTER UPDATE OF seq, payload ON " + t.jobs + " BEGIN DELETE FROM " + fts + " WHERE rowid = old.seq; INSERT INTO " + fts + " (rowid, body) VALUES (new.seq, CAST(new.payload AS TEXT)); END",
		"INSERT INTO " + fts + " (rowid, body) SELECT seq, CAST(payload AS TEXT) FROM " + t.jobs,
	}...) {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (sqliteDialect) disableSearch(ctx context.Context, db DB, t tableNames) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, s := range sqliteSearchDrops(t) {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// sqliteSearchDrops are the statements that drop the index's table and
// triggers, where they exist.
func sqliteSearchDrops(t tableNames) []string {
	fts, ins, del, upd := sqliteSearchNames(t)
	return []string{"DROP TRIGGER IF EXISTS " + ins, "DROP TRIGGER IF EXISTS " + del, "DROP TRIGGER IF EXISTS " + upd, "DROP TABLE IF EXISTS " + fts}
}

// searchProbe: the index is on when its table and its three triggers
// exist; its table alone would be stale.
func (sqliteDialect) searchProbe(t tableNames) (string, []any) {
	return "SELECT COUNT(*) = 4 FROM sqlite_master WHERE type = 'table' AND name = ? OR type = 'trigger' AND name IN (?, ?, ?)",
		[]any{t.raw + "_search", t.raw + "_search_ins", t.raw + "_search_del", t.raw + "_search_upd"}
}

func (sqliteDialect) indexedMatch(t tableNames, search string) (string, []any, bool) {
	if !utf8.ValidString(search) || strings.IndexByte(search, 0) >= 0 {
		return "", nil, false
	}
	_, last := utf8.DecodeLastRuneInString(search)
	head := search[:len(search)-last]
	if utf8.RuneCountInString(head) < 3 {
		return "", nil, false
	}
	fts, _, _, _ := sqliteSearchNames(t)
	return "seq IN (SELECT rowid FROM " + fts + " WHERE " + fts + " MATCH ?)", []any{`"` + strings.ReplaceAll(head, `"`, `""`) + `"`}, true
}
