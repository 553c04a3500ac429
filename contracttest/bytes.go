package contracttest

import (
	"slices"
	"testing"

	"github.com/meridianjobs/meridian/queue"
)

// testBytes checks that IDs, queue names and unique keys are compared byte
// for byte: values that differ only in trailing spaces are different
// values. (A PAD SPACE collation, such as MySQL's utf8mb4_bin, compares
// "emails " equal to "emails".)
func (s *suite) testBytes(t *testing.T) {
	s.check(t, "IDs", func(t *testing.T, q queue.Queue) {
		a := newJob("ids")
		b := newJob("ids")
		b.ID = a.ID + " "
		push(t, q, a)
		push(t, q, b) // not a duplicate of a
		wantLen(t, q, "ids", 2)
		got := reserve(t, q, []string{"ids"}, 10, longLease)
		if want := sorted(a.ID, b.ID); !slices.Equal(sortedIDs(got), want) {
			t.Fatalf("Reserve returned %q, want %q", sortedIDs(got), want)
		}
		ack(t, q, got[0])
		ack(t, q, got[1])
	})

	s.check(t, "QueueNames", func(t *testing.T, q queue.Queue) {
		plain, spaced := newJob("emails"), newJob("emails ")
		push(t, q, spaced)
		push(t, q, plain)
		wantLen(t, q, "emails", 1)
		wantLen(t, q, "emails ", 1)
		got := reserveOne(t, q, "emails", plain.ID, longLease)
		if got.Queue != "emails" {
			t.Errorf("reserved job's Queue = %q, want %q", got.Queue, "emails")
		}
		got = reserveOne(t, q, "emails ", spaced.ID, longLease)
		if got.Queue != "emails " {
			t.Errorf("reserved job's Queue = %q, want %q", got.Queue, "emails ")
		}
	})

	s.check(t, "UniqueKeys", func(t *testing.T, q queue.Queue) {
		a, b := newJob("keys"), newJob("keys")
		a.UniqueKey, b.UniqueKey = "welcome:42", "welcome:42 "
		push(t, q, a)
		push(t, q, b) // another key: not a duplicate
		wantLen(t, q, "keys", 2)
		got := reserve(t, q, []string{"keys"}, 10, longLease)
		keys := make([]string, len(got))
		for i, j := range got {
			keys[i] = j.UniqueKey
		}
		if want := sorted(a.UniqueKey, b.UniqueKey); !slices.Equal(sorted(keys...), want) {
			t.Fatalf("reserved unique keys %q, want %q", keys, want)
		}
	})
}
