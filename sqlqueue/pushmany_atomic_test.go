package sqlqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/meridianjobs/meridian/internal/testutil"
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

// TestPushManyRevivalTimeoutStoresNothing checks that a batch push whose
// revival of a dead letter's ID cannot finish (another transaction holds
// that row locked until the push's context ends) stores none of the
// batch: on PostgreSQL and MariaDB the batch's new job used to stay
// committed while PushMany reported failure, so a caller retrying with
// fresh IDs dispatched it twice.
func TestPushManyRevivalTimeoutStoresNothing(t *testing.T) {
	t.Parallel()
	for d, open := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			if d == sqlqueue.SQLite {
				t.Skip("SQLite locks the whole database, not a row: the push waits before writing anything")
			}
			t.Parallel()
			s := newStore(t, open(t))
			q, db := s.open(t)
			ctx := t.Context()
			const deadID, newID = "dead-letter", "new-job"
			if err := q.Push(ctx, queue.Job{ID: deadID, Name: "x", Queue: "revive", MaxAttempts: 1}); err != nil {
				t.Fatal(err)
			}
			got, err := q.Reserve(ctx, []string{"revive"}, 1, time.Minute)
			if err != nil || len(got) != 1 {
				t.Fatalf("Reserve = %v, %v", got, err)
			}
			if err := testutil.Fail(ctx, q, got[0].Lease(), "boom"); err != nil {
				t.Fatal(err)
			}

			holder, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			var id string
			if err := holder.QueryRowContext(ctx, "SELECT id FROM "+s.table+" WHERE id = '"+deadID+"' FOR UPDATE").Scan(&id); err != nil {
				t.Fatalf("locking the dead letter: %v", err)
			}
			// Long enough for the insert of the new job on a loaded
			// machine; the revival waits on the lock until it passes.
			short, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, pushErr := q.PushMany(short, []queue.Job{
				{ID: newID, Name: "x", Queue: "revive"},
				{ID: deadID, Name: "x", Queue: "revive"},
			})
			cancel()
			if pushErr == nil {
				t.Fatal("PushMany succeeded while the dead letter it revives was locked")
			}
			if err := holder.Rollback(); err != nil {
				t.Fatal(err)
			}
			// A statement the server was still running when the push gave
			// up holds the dead letter's row until it ends: lock it once
			// more, so that what it did is settled before counting. On
			// InnoDB that statement's insert holds a shared lock on the
			// duplicate row and upgrades it while this lock waits: the
			// server breaks that deadlock by rolling back this lock, the
			// smaller transaction, so it is taken again.
			for try := 1; ; try++ {
				err := lockRow(ctx, db, s.table, deadID)
				if err == nil {
					break
				}
				var me *mysql.MySQLError
				if !errors.As(err, &me) || me.Number != 1213 || try == 10 {
					t.Fatalf("locking the dead letter again (try %d): %v", try, err)
				}
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+s.table+" WHERE id = '"+newID+"'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("PushMany failed (%v) but stored the batch's new job", pushErr)
			}
			if info, err := q.GetJob(ctx, deadID); err != nil || info.State != queue.StateDead {
				t.Errorf("the dead letter is %v, %v after the failed push; want still dead", info.State, err)
			}
		})
	}
}

// lockRow locks the row id of table in a transaction of its own and
// commits: it returns once every transaction that held the row has ended.
func lockRow(ctx context.Context, db *sql.DB, table, id string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var got string
	if err := tx.QueryRowContext(ctx, "SELECT id FROM "+table+" WHERE id = '"+id+"' FOR UPDATE").Scan(&got); err != nil {
		return err
	}
	return tx.Commit()
}
