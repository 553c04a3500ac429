package sqlqueue_test

import (
	"fmt"
	"testing"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// rejectTrigger makes the database itself refuse a job named "poison", as
// a constraint or a hostile value the validation does not know would.
var rejectTrigger = map[sqlqueue.Dialect][]string{
	sqlqueue.Postgres: {
		`CREATE FUNCTION %[1]s_reject() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poison refused'; END IF; RETURN NEW; END $$`,
		`CREATE TRIGGER %[1]s_reject BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_reject()`,
	},
	sqlqueue.MySQL: {
		`CREATE TRIGGER %[1]s_reject BEFORE INSERT ON %[1]s FOR EACH ROW
		 BEGIN IF NEW.name = 'poison' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poison refused'; END IF; END`,
	},
	sqlqueue.SQLite: {
		`CREATE TRIGGER %[1]s_reject BEFORE INSERT ON %[1]s FOR EACH ROW WHEN NEW.name = 'poison'
		 BEGIN SELECT RAISE(ABORT, 'poison refused'); END`,
	},
}

// TestPushManyIsWholeOrNothing checks that a batch push the database
// refuses part-way (a job at index 2,300 of 2,500, in its second INSERT
// chunk) stores none of the batch, so that its error tells the truth: on
// MariaDB the first 2,000 jobs used to stay committed while PushMany
// reported nothing stored.
func TestPushManyIsWholeOrNothing(t *testing.T) {
	t.Parallel()
	for d, open := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, open(t))
			q, db := s.open(t)
			ctx := t.Context()
			for _, stmt := range rejectTrigger[d] {
				if _, err := db.ExecContext(ctx, fmt.Sprintf(stmt, s.table)); err != nil {
					t.Fatalf("creating the trigger: %v", err)
				}
			}
			if d == sqlqueue.Postgres {
				t.Cleanup(func() { _, _ = db.Exec("DROP FUNCTION IF EXISTS " + s.table + "_reject() CASCADE") })
			}
			jobs := make([]queue.Job, 2500)
			for i := range jobs {
				jobs[i] = queue.Job{Name: "ok", Queue: "bulk", Payload: []byte(`{}`)}
			}
			jobs[2300].Name = "poison"
			if _, err := q.PushMany(ctx, jobs); err == nil {
				t.Fatal("PushMany stored a batch the database refused")
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+s.table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("after a refused batch push the table holds %d jobs, want 0", n)
			}

			// The same batch without the refused job is stored whole.
			jobs[2300].Name = "ok"
			stored, err := q.PushMany(ctx, jobs)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, ok := range stored {
				if ok {
					got++
				}
			}
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+s.table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if got != len(jobs) || n != len(jobs) {
				t.Errorf("PushMany reported %d stored, the table holds %d; want %d", got, n, len(jobs))
			}
		})
	}
}
