package dashboard_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/scale"
)

// scaleDB opens the database of a scale store's queue URL.
func scaleDB(t *testing.T, dialect, queueURL string) *sql.DB {
	t.Helper()
	u, err := url.Parse(queueURL)
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Del("table")
	v.Del("retention")
	u.RawQuery = v.Encode()
	var driver, source string
	switch dialect {
	case "postgres":
		driver, source = "pgx", u.String()
	case "mysql":
		driver, source = "mysql", u.User.String()+"@tcp("+u.Host+")"+u.Path
	default:
		driver, source = "sqlite", u.Path
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// scaleFillBatch is how many rows one INSERT ... SELECT of scaleFillSQL
// stores.
const scaleFillBatch = 100000

// scaleFillSQL stores the jobs of shape in table as scale.Fill would
// leave them (done and kept, dead letters, scheduled 1 to 12 hours ahead,
// waiting on the unserved queue, ready), written directly with INSERT ...
// SELECT over a row generator, 100,000 rows a statement: the counting
// triggers count them as any insert. Done and dead jobs finished within
// the last 20 hours (the store keeps done ones for 24).
func scaleFillSQL(t *testing.T, db *sql.DB, dialect, table string, shape scale.Shape) scale.Counts {
	t.Helper()
	n := shape.Jobs
	// Per 1,000 rows: 760 done, 66 dead, 59 scheduled, 95 on the backlog,
	// the rest ready (scale.Shape's default proportions).
	var c scale.Counts
	for i := 1; i <= n; i++ {
		switch m := i % 1000; {
		case m < 760:
			c.Done++
		case m < 826:
			c.Failed++
		case m < 885:
			c.Scheduled++
		case m < 980:
			c.Waiting++
		default:
			c.Ready++
		}
	}
	now := time.Now().UnixMicro()
	concat := func(parts ...string) string {
		if dialect == "mysql" {
			return "CONCAT(" + strings.Join(parts, ", ") + ")"
		}
		return "(" + strings.Join(parts, " || ") + ")"
	}
	g := "g"
	state := fmt.Sprintf(`CASE WHEN %[1]s %% 1000 < 760 THEN 'done' WHEN %[1]s %% 1000 < 826 THEN 'dead' ELSE 'pending' END`, g)
	queueOf := fmt.Sprintf(`CASE WHEN %[1]s %% 1000 >= 885 AND %[1]s %% 1000 < 980 THEN '%[2]s' ELSE %[3]s END`, g, scale.Backlog, concat("'q'", fmt.Sprintf("CAST(1 + %s %% %d AS CHAR)", g, len(shape.Served()))))
	if dialect != "mysql" {
		queueOf = strings.Replace(queueOf, "AS CHAR", "AS TEXT", 1)
	}
	runAt := fmt.Sprintf(`CASE WHEN %[1]s %% 1000 >= 826 AND %[1]s %% 1000 < 885 THEN %[2]d + (%[1]s %% 39600) * 1000000 ELSE %[3]d - %[4]d + %[1]s END`, g, now+3600e6, now, n)
	finished := fmt.Sprintf(`CASE WHEN %[1]s %% 1000 < 826 THEN %[2]d - ((%[1]s * 7919) %% 72000) * 1000000 ELSE 0 END`, g, now)
	payload := concat(`'{"n":'`, fmt.Sprintf("CAST(%s AS CHAR)", g), `',"note":"order 4711 for customer 815, shipped by ground"}'`)
	lastError := fmt.Sprintf(`CASE WHEN %[1]s %% 1000 >= 760 AND %[1]s %% 1000 < 826 THEN 'scale: upstream answered 503' ELSE '' END`, g)
	attempts := fmt.Sprintf(`CASE WHEN %[1]s %% 1000 < 760 THEN 1 WHEN %[1]s %% 1000 < 826 THEN 5 ELSE 0 END`, g)
	switch dialect {
	case "postgres":
		payload = "convert_to(" + strings.Replace(payload, "AS CHAR", "AS TEXT", 1) + ", 'UTF8')"
	case "sqlite":
		payload = "CAST(" + strings.Replace(payload, "AS CHAR", "AS TEXT", 1) + " AS BLOB)"
	}
	for from := 1; from <= n; from += scaleFillBatch {
		to := min(from+scaleFillBatch-1, n)
		var gen string
		switch dialect {
		case "postgres":
			gen = fmt.Sprintf("generate_series(CAST(%d AS BIGINT), %d) AS s(g)", from, to)
		case "mysql":
			gen = fmt.Sprintf("(SELECT seq AS g FROM seq_%d_to_%d) s", from, to)
		default:
			gen = fmt.Sprintf("(WITH RECURSIVE s(g) AS (SELECT %d UNION ALL SELECT g + 1 FROM s WHERE g < %d) SELECT g FROM s) s", from, to)
		}
		id := concat("'scale-'", fmt.Sprintf("CAST(%s AS CHAR)", g))
		if dialect != "mysql" {
			id = strings.Replace(id, "AS CHAR", "AS TEXT", 1)
		}
		stmt := fmt.Sprintf(`INSERT INTO %s (id, queue, name, payload, priority, attempts, max_attempts, timeout_us, unique_key, tags, meta,
  available_at, run_at, created_at, updated_at, finished_at, last_error, lease_token, state)
SELECT %s, %s, '%s', %s, 0, %s, 0, 0, NULL, '', '', %s, %s, %d, %d, %s, %s, NULL, %s FROM %s`,
			table, id, queueOf, scale.JobName, payload, attempts, runAt, runAt, now-int64(n), now, finished, lastError, state, gen)
		if _, err := db.ExecContext(context.Background(), stmt); err != nil {
			t.Fatalf("filling rows %d to %d: %v\n%s", from, to, err, stmt)
		}
	}
	return c
}
