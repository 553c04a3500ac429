package sqlqueue

import (
	"context"
	"fmt"
	"strings"
)

// PostgreSQL's payload search index (see searchIndexer): a pg_trgm GIN
// index on encode(payload, 'escape'), the payload as text with each NUL
// byte and each byte of 0x80 or more written as \ooo (three octal digits)
// and each backslash doubled. The escape form maps each byte to a fixed
// string, so a payload that holds a byte string holds its escape form
// too: "encode(payload, 'escape') LIKE '%' || escape(search) || '%'" is
// true of every match, whatever the payload's encoding, and the index
// answers it. It may be true of others (the escape form of the byte 0x81,
// \201, is in that of the text \201, \\201), so the exact byte test stays
// in the query and a match is what the scan calls one: a byte substring.

// pgSearchIndex is the index's name for the jobs table t.
func pgSearchIndex(t tableNames) string { return pgDialect{}.quote(t.raw + "_search") }

func (pgDialect) enableSearch(ctx context.Context, db DB, t tableNames) error {
	if _, err := db.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS pg_trgm"); err != nil {
		return fmt.Errorf("creating the pg_trgm extension (needs the CREATE right on the database, or a superuser once): %w", err)
	}
	// A CONCURRENTLY build that failed leaves an invalid index behind,
	// which IF NOT EXISTS would keep: drop it first.
	var invalid bool
	err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass($1) AND NOT indisvalid)", pgSearchIndex(t)).Scan(&invalid)
	if err != nil {
		return err
	}
	if invalid {
		if _, err := db.ExecContext(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgSearchIndex(t)); err != nil {
			return err
		}
	}
	if _, err := db.ExecContext(ctx, "CREATE INDEX CONCURRENTLY IF NOT EXISTS "+pgSearchIndex(t)+" ON "+t.jobs+" USING gin (encode(payload, 'escape') gin_trgm_ops)"); err != nil {
		return err
	}
	// The planner estimates a LIKE on the indexed expression from that
	// expression's statistics, which only an ANALYZE after the index
	// gathers (a sample, not the table).
	_, err = db.ExecContext(ctx, "ANALYZE "+t.jobs)
	return err
}

func (pgDialect) disableSearch(ctx context.Context, db DB, t tableNames) error {
	_, err := db.ExecContext(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgSearchIndex(t))
	return err
}

func (pgDialect) searchProbe(t tableNames) (string, []any) {
	return "SELECT COUNT(*) FROM pg_index WHERE indexrelid = to_regclass(?) AND indisvalid", []any{pgSearchIndex(t)}
}

// indexedMatch answers a search holding three ASCII letters or digits in
// a row: pg_trgm takes its trigrams from a pattern's words, and a pattern
// with none would read the whole index.
func (pgDialect) indexedMatch(_ tableNames, search string) (string, []any, bool) {
	run, ok := 0, false
	for i := range len(search) {
		c := search[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			run++
			ok = ok || run >= 3
		} else {
			run = 0
		}
	}
	if !ok {
		return "", nil, false
	}
	return "encode(payload, 'escape') LIKE ?", []any{"%" + likeEscape(pgEscapeForm(search)) + "%"}, true
}

// pgEscapeForm is what encode(s, 'escape') returns for the bytes s.
func pgEscapeForm(s string) string {
	var b strings.Builder
	for i := range len(s) {
		switch c := s[i]; {
		case c == 0 || c >= 0x80:
			fmt.Fprintf(&b, `\%03o`, c)
		case c == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// likeEscape escapes LIKE's metacharacters in s for LIKE's default escape
// character, the backslash.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
