package sqlqueue

import (
	"strconv"
	"testing"
)

// BenchmarkInList compares the two ways this package writes an IN list of
// IDs: the hot paths (reserve's update by key, MySQL's batch ack) build
// "IN (?, ?, ...)" by hand and take the final text from q.sql's cache,
// keyed by the list's length; the paths off the hot path (pruning, bulk
// deletes, revive lookups) expand one "IN (?)" with sqlx.In and rebind it
// each call (sqlIn). The numbers are why the hot paths keep theirs.
func BenchmarkInList(b *testing.B) {
	for _, d := range []dialect{pgDialect{}, mysqlDialect{}} {
		q := &Queue{d: d, t: names(d, "meridian_jobs")}
		ids := make([]string, 500)
		for i := range ids {
			ids[i] = "job-" + strconv.Itoa(i)
		}
		b.Run(string(d.name())+"/cached", func(b *testing.B) {
			for b.Loop() {
				args := make([]any, len(ids))
				for i, id := range ids {
					args[i] = id
				}
				_ = q.sql("UPDATE {jobs} SET updated_at = ? WHERE id IN (" + placeholders(len(ids)) + ")")
			}
		})
		b.Run(string(d.name())+"/sqlx.In", func(b *testing.B) {
			for b.Loop() {
				if _, _, err := q.sqlIn("UPDATE {jobs} SET updated_at = ? WHERE id IN (?)", int64(1), ids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
