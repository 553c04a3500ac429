package sqlqueue

import (
	"strconv"
	"testing"
)

// BenchmarkInList compares the two ways this package runs an IN list of
// IDs: the hot paths (the claim's update by key, MySQL's batch ack) write
// a list mark ("IN ({list ?})") that stmtN expands once per list length
// and caches; the paths off the hot path (pruning, bulk deletes, revive
// lookups) expand one "IN (?)" with sqlx.In and rebind it each call
// (stmtIn). The numbers are why the hot paths keep theirs.
func BenchmarkInList(b *testing.B) {
	for _, d := range []dialect{pgDialect{}, mysqlDialect{}} {
		t := names(d, "meridian_jobs")
		q := &Queue{d: d, t: t, qs: render(d, t, queryTemplates{
			qAckByID:      "UPDATE {jobs} SET updated_at = ? WHERE id IN ({list ?})",
			qForgetDeadIn: "UPDATE {jobs} SET updated_at = ? WHERE id IN (?)",
		})}
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
				_ = q.stmtN(qAckByID, len(ids))
			}
		})
		b.Run(string(d.name())+"/sqlx.In", func(b *testing.B) {
			for b.Loop() {
				if _, _, err := q.stmtIn(qForgetDeadIn, int64(1), ids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
