package sqlqueue

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestIsConflict checks which errors each dialect takes for a transaction
// the server rolled back whole, the ones a push runs again.
func TestIsConflict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    dialect
		err  error
		want bool
	}{
		{"mysql deadlock", mysqlDialect{}, &mysql.MySQLError{Number: 1213}, true},
		{"mysql deadlock wrapped", mysqlDialect{}, fmt.Errorf("pushing: %w", &mysql.MySQLError{Number: 1213}), true},
		{"mysql lock wait timeout", mysqlDialect{}, &mysql.MySQLError{Number: 1205}, false},
		{"mysql duplicate", mysqlDialect{}, &mysql.MySQLError{Number: 1062}, false},
		{"postgres deadlock", pgDialect{}, &pgconn.PgError{Code: "40P01"}, true},
		{"postgres serialization", pgDialect{}, &pgconn.PgError{Code: "40001"}, true},
		{"postgres unique", pgDialect{}, &pgconn.PgError{Code: "23505"}, false},
		{"sqlite", sqliteDialect{}, errors.New("database is locked"), false},
		{"nil", mysqlDialect{}, nil, false},
	} {
		if got := tc.d.isConflict(tc.err); got != tc.want {
			t.Errorf("%s: isConflict = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAgainOnConflict checks that a push rolled back by a deadlock is run
// again, at most conflictTries times in all, and that other errors are not.
func TestAgainOnConflict(t *testing.T) {
	t.Parallel()
	q := &Queue{d: mysqlDialect{}}
	deadlock := &mysql.MySQLError{Number: 1213}
	for _, tc := range []struct {
		name      string
		fails     int
		err       error
		wantTries int
		wantErr   bool
	}{
		{"succeeds at once", 0, deadlock, 1, false},
		{"deadlock once", 1, deadlock, 2, false},
		{"deadlock always", 10, deadlock, conflictTries, true},
		{"other error", 10, &mysql.MySQLError{Number: 1062}, 1, true},
	} {
		tries := 0
		err := q.againOnConflict(t.Context(), func() error {
			tries++
			if tries <= tc.fails {
				return tc.err
			}
			return nil
		})
		if tries != tc.wantTries || (err != nil) != tc.wantErr {
			t.Errorf("%s: %d tries, err %v; want %d tries, error %v", tc.name, tries, err, tc.wantTries, tc.wantErr)
		}
	}
}

// TestMySQLIsConfig checks which MySQL errors stop a Worker: a missing
// jobs table does, the counts table reported missing by a statement that
// met a trigger being created (MariaDB, MDEV-26048) does not.
func TestMySQLIsConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"jobs table missing", &mysql.MySQLError{Number: 1146, Message: "Table 'test.meridian_jobs' doesn't exist"}, true},
		{"counts table during a trigger's creation", fmt.Errorf("nacking: %w", &mysql.MySQLError{Number: 1146, Message: "Table 'test.meridian_jobs_counts' doesn't exist"}), false},
		{"access denied", &mysql.MySQLError{Number: 1045, Message: "Access denied"}, true},
		{"deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, false},
	} {
		if got := (mysqlDialect{}).isConfig(tc.err); got != tc.want {
			t.Errorf("%s: isConfig = %v, want %v", tc.name, got, tc.want)
		}
	}
}
