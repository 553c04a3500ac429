package sqlqueue_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// TestGatherSkipsAGap checks that a gather whose locked read passes over
// a member another transaction holds (a concurrent gather, whose SKIP
// LOCKED scan interleaved with this one) stores no set across that gap:
// its sets would not hold the group's oldest members. MariaDB's contract
// run once stored a set of members 1-55 and 57 while another gather held
// member 56. Once the lock is gone, the next gather stores the oldest.
func TestGatherSkipsAGap(t *testing.T) {
	t.Parallel()
	for d, open := range backends(t) {
		if d == sqlqueue.SQLite {
			continue // one writer at a time: a gather never meets a locked row
		}
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, open(t))
			q, db := s.open(t)
			ctx := t.Context()
			ids := make([]string, 16)
			for i := range ids {
				ids[i] = queue.NewID()
				j := queue.Job{ID: ids[i], Name: "gap", Queue: "gap", Payload: []byte(strconv.Itoa(i)), Meta: map[string]string{queue.MetaGroup: "g"}}
				if err := q.Push(ctx, j); err != nil {
					t.Fatal(err)
				}
			}
			rule, err := queue.GroupRule{Grace: time.Hour, MaxSize: 7}.Normalize()
			if err != nil {
				t.Fatal(err)
			}

			// Hold member 3 as a concurrent gather would.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			lock := fmt.Sprintf("SELECT id FROM %s WHERE id = ? FOR UPDATE", s.table)
			if d == sqlqueue.Postgres {
				lock = fmt.Sprintf("SELECT id FROM %s WHERE id = $1 FOR UPDATE", s.table)
			}
			var held string
			if err := tx.QueryRowContext(ctx, lock, ids[3]).Scan(&held); err != nil {
				t.Fatal(err)
			}
			n, err := q.GatherGroups(ctx, []string{"gap"}, "gap", rule)
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("a gather that passed over a held member stored %d sets, want 0", n)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}

			if n, err = q.GatherGroups(ctx, []string{"gap"}, "gap", rule); err != nil || n != 2 {
				t.Fatalf("GatherGroups after the lock ends = %d, %v; want 2 sets", n, err)
			}
			var got []int
			for {
				sets, err := q.Reserve(ctx, []string{"gap"}, 10, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if len(sets) == 0 {
					break
				}
				for _, set := range sets {
					var ms []int
					if err := json.Unmarshal(set.Payload, &ms); err != nil {
						t.Fatalf("set payload %q: %v", set.Payload, err)
					}
					got = append(got, ms...)
				}
			}
			slices.Sort(got)
			if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}; !slices.Equal(got, want) {
				t.Errorf("sets hold %v, want the oldest 14: %v", got, want)
			}
		})
	}
}
