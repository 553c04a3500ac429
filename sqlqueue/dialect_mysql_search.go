package sqlqueue

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// MariaDB's payload search index (see searchIndexer). InnoDB's FULLTEXT
// indexes split words at spaces and punctuation and MariaDB ships no
// ngram parser, so neither answers a substring; the Mroonga storage
// engine MariaDB ships as a plugin (Debian and Ubuntu: the package
// mariadb-plugin-mroonga) does, with a bigram tokenizer. The index is
// three parts beside the jobs table t:
//
//   - <t>_search, a Mroonga table of (seq, body): body is the payload's
//     bytes read as latin1, one character a byte, so that every byte
//     string is valid text and each pair of bytes is a token
//     (TokenBigramSplitSymbolAlphaDigit, no normalizer: no case folding,
//     no byte dropped). A job may have several rows: one per payload it
//     held.
//   - <t>_search_gone, an InnoDB table of the seqs of deleted jobs.
//   - triggers on t: an insert adds the job's row to <t>_search, an
//     update that changes the payload adds another, a delete notes the
//     seq in <t>_search_gone.
//
// Mroonga is not transactional: a row written by a trigger stays when
// the job's transaction rolls back. So the index never removes a row in
// the transaction that deletes the job (a rolled-back ack would leave a
// job the index no longer finds); the delete goes into <t>_search_gone,
// which rolls back with it, and the maintenance pass (pruneSearch)
// removes those seqs' rows. The index holds a row for every job that
// holds a payload, and perhaps others (a push rolled back, a payload
// edited, a job deleted since the last pass): it answers a superset of
// the matches, and the exact byte test stays in the query.
//
// A search of three bytes or more asks it for the search as a phrase
// (its bigrams in a row), escaped for Groonga's query syntax; a shorter
// one, whose bigrams are in most payloads, is a scan. MySQL (Oracle) has
// no Mroonga: there the index cannot be enabled and every search is the
// time-budgeted scan.

// mysqlSearchNames are the index's tables and triggers for the jobs
// table t.
type mysqlSearchNames struct{ side, gone, ins, upd, del string }

func mysqlSearch(t tableNames) mysqlSearchNames {
	q := mysqlDialect{}.quote
	return mysqlSearchNames{
		side: q(t.raw + "_search"), gone: q(t.raw + "_search_gone"),
		ins: q(t.raw + "_search_ins"), upd: q(t.raw + "_search_upd"), del: q(t.raw + "_search_del"),
	}
}

func (mysqlDialect) enableSearch(ctx context.Context, db DB, t tableNames) error {
	if err := mroongaLoaded(ctx, db); err != nil {
		return err
	}
	probe, args := mysqlDialect{}.searchProbe(t)
	var on int
	if err := db.QueryRowContext(ctx, probe, args...).Scan(&on); err != nil {
		return err
	}
	if on == 1 {
		return nil
	}
	// A part without the rest is stale: build it all again.
	if err := (mysqlDialect{}).disableSearch(ctx, db, t); err != nil {
		return err
	}
	n := mysqlSearch(t)
	body := "CONVERT(NEW.payload USING latin1)"
	for _, s := range []string{
		"CREATE TABLE " + n.side + " (v BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, seq BIGINT NOT NULL, body LONGTEXT CHARACTER SET latin1 COLLATE latin1_bin NOT NULL, KEY (seq)," +
			` FULLTEXT INDEX (body) COMMENT 'tokenizer "TokenBigramSplitSymbolAlphaDigit", normalizer "none"') ENGINE = Mroonga DEFAULT CHARSET = latin1`,
		"CREATE TABLE " + n.gone + " (seq BIGINT NOT NULL PRIMARY KEY) ENGINE = InnoDB",
		// The triggers first, then the fill: a job pushed meanwhile has
		// a row from one or both, and one deleted meanwhile is noted.
		"CREATE TRIGGER " + n.ins + " AFTER INSERT ON " + t.jobs + " FOR EACH ROW INSERT INTO " + n.side + " (seq, body) VALUES (NEW.seq, " + body + ")",
		"CREATE TRIGGER " + n.upd + " AFTER UPDATE ON " + t.jobs + " FOR EACH ROW IF NOT (NEW.payload <=> OLD.payload) THEN INSERT INTO " + n.side + " (seq, body) VALUES (NEW.seq, " + body + "); END IF",
		"CREATE TRIGGER " + n.del + " AFTER DELETE ON " + t.jobs + " FOR EACH ROW INSERT IGNORE INTO " + n.gone + " (seq) VALUES (OLD.seq)",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	// The fill reads the jobs without locking them (READ COMMITTED), so
	// pushes and acks go on while it runs.
	return dbTx(ctx, db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(ex execer) error {
		_, err := ex.ExecContext(ctx, "INSERT INTO "+n.side+" (seq, body) SELECT seq, CONVERT(payload USING latin1) FROM "+t.jobs)
		return err
	})
}

// mroongaLoaded makes sure the server has the Mroonga engine, installing
// its plugin when the server has the plugin's file but has not loaded it
// (which needs the INSERT right on mysql.plugin, as root has).
func mroongaLoaded(ctx context.Context, db DB) error {
	engine := func() (bool, error) {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.ENGINES WHERE ENGINE = 'Mroonga' AND SUPPORT IN ('YES', 'DEFAULT')").Scan(&n)
		return n == 1, err
	}
	if ok, err := engine(); err != nil || ok {
		return err
	}
	_, ierr := db.ExecContext(ctx, "INSTALL SONAME 'ha_mroonga'")
	if ok, err := engine(); err != nil || ok {
		return err
	}
	return fmt.Errorf("the payload search index on MariaDB needs its Mroonga storage engine (Debian and Ubuntu: the package mariadb-plugin-mroonga; MySQL has none), and INSTALL SONAME 'ha_mroonga' failed: %v; searches scan within a time budget: %w", ierr, queue.ErrUnsupported)
}

func (mysqlDialect) disableSearch(ctx context.Context, db DB, t tableNames) error {
	n := mysqlSearch(t)
	for _, s := range []string{
		"DROP TRIGGER IF EXISTS " + n.ins, "DROP TRIGGER IF EXISTS " + n.upd, "DROP TRIGGER IF EXISTS " + n.del,
		"DROP TABLE IF EXISTS " + n.side, "DROP TABLE IF EXISTS " + n.gone,
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// searchProbe: the index is on when its two tables (the first on Mroonga)
// and its three triggers exist.
func (mysqlDialect) searchProbe(t tableNames) (string, []any) {
	return "SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND (TABLE_NAME = ? AND ENGINE = 'Mroonga' OR TABLE_NAME = ?))" +
			" + (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = ? AND TRIGGER_NAME IN (?, ?, ?)) = 5",
		[]any{t.raw + "_search", t.raw + "_search_gone", t.raw, t.raw + "_search_ins", t.raw + "_search_upd", t.raw + "_search_del"}
}

// indexedMatch asks the index for the search as a Groonga phrase: in
// double quotes, each double quote and backslash escaped with a
// backslash. The phrase is sent in hex, since a parameter is text in the
// connection's character set and a search need not be valid UTF-8.
func (mysqlDialect) indexedMatch(t tableNames, search string) (string, []any, bool) {
	if len(search) < 3 {
		return "", nil, false
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(search) {
		if c := search[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(search[i])
	}
	b.WriteByte('"')
	n := mysqlSearch(t)
	return "seq IN (SELECT seq FROM " + n.side + " WHERE MATCH (body) AGAINST (CONVERT(UNHEX(?) USING latin1) IN BOOLEAN MODE))", []any{hex.EncodeToString([]byte(b.String()))}, true
}

// searchPruneBatch is how many deleted jobs' index rows one step of
// pruneSearch removes.
const searchPruneBatch = 1000

// pruneSearch removes the index rows of the jobs deleted since the last
// pass (see the index's description above), searchPruneBatch seqs a
// step, until none is left or ctx ends. Each step deletes the rows
// before the seqs that name them, so a step cut short is done again.
func (mysqlDialect) pruneSearch(ctx context.Context, q *Queue) (int, error) {
	n := mysqlSearch(q.t)
	var exists int
	err := q.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", q.t.raw+"_search_gone").Scan(&exists)
	if err != nil || exists == 0 {
		return 0, err
	}
	pruned := 0
	for {
		rs, err := q.db.QueryContext(ctx, "SELECT seq FROM "+n.gone+" ORDER BY seq LIMIT ?", searchPruneBatch)
		if err != nil {
			return pruned, err
		}
		var seqs []any
		for rs.Next() {
			var s int64
			if err := rs.Scan(&s); err != nil {
				rs.Close()
				return pruned, err
			}
			seqs = append(seqs, s)
		}
		rs.Close()
		if err := rs.Err(); err != nil || len(seqs) == 0 {
			return pruned, err
		}
		in := placeholders(len(seqs))
		if _, err := q.db.ExecContext(ctx, "DELETE FROM "+n.side+" WHERE seq IN ("+in+")", seqs...); err != nil {
			return pruned, err
		}
		if _, err := q.db.ExecContext(ctx, "DELETE FROM "+n.gone+" WHERE seq IN ("+in+")", seqs...); err != nil {
			return pruned, err
		}
		pruned += len(seqs)
		if len(seqs) < searchPruneBatch {
			return pruned, nil
		}
	}
}
