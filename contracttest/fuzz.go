package contracttest

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// FuzzPushReserve is the suite's fuzz target for one or more queues, each
// named for its messages (a driver, a dialect): every input builds a job
// from arbitrary field values and pushes it to each queue. A job that
// driver.Validate refuses must be refused by Push with queue.ErrInvalid; any
// other must be stored, reserved back with every field as pushed, and
// acked, leaving the queue as it was. Call it from a driver's
// FuzzPushReserve with queues opened once for the whole run; run it with
// go test -fuzz.
func FuzzPushReserve(f *testing.F, queues map[string]queue.Queue) {
	f.Helper()
	type seed struct {
		queue, name      string
		payload          []byte
		unique, tag, key string
		val              string
		priority, max    int64
	}
	for _, s := range []seed{
		{"emails", "Send", []byte(`{"to":"ada"}`), "", "t", "k", "v", 0, 0},
		{"digests", "Notify", []byte(`{"user":42}`), "", "t", driver.MetaGroup, "user-42", 0, 0},
		{"digests", "Notify", []byte(`not json`), "", "t", driver.MetaGroup, "user-42", 0, 0},
		{"", "", nil, "u", "", "", "", -1, 3},
		{"é☃", "名前", []byte{0, 0xff, 0xfe}, "trailing ", "tag ", "k\x00", "v\x00", 1 << 31, -1},
		{"q\x00", "n", []byte("x"), "", "", "", "", 0, 0},
		{"q", "bad\xff", []byte("x"), "", "", "", "", 0, 0},
		{"q", "n", bytes.Repeat([]byte("p"), 70000), string(bytes.Repeat([]byte("u"), 256)), "", "", "", -(1 << 31), 1<<31 - 1},
	} {
		f.Add(s.queue, s.name, s.payload, s.unique, s.tag, s.key, s.val, s.priority, s.max)
	}
	names := slices.Sorted(maps.Keys(queues))
	f.Fuzz(func(t *testing.T, qname, name string, payload []byte, unique, tag, key, val string, priority, maxAttempts int64) {
		j := queue.Job{
			ID: driver.NewID(), Queue: qname, Name: name, Payload: payload, UniqueKey: unique,
			Priority: int(priority), MaxAttempts: int(maxAttempts),
			Tags: []string{tag}, Meta: map[string]string{key: val},
		}
		invalid := driver.Validate(j)
		want := j
		if want.Queue == "" {
			want.Queue = queue.DefaultQueue
		}
		for _, n := range names {
			q := queues[n]
			err := q.Push(t.Context(), j)
			if invalid != nil {
				if !errors.Is(err, queue.ErrInvalid) {
					t.Fatalf("%s: Push of a job Validate refuses (%v) returned %v, want ErrInvalid", n, invalid, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: Push of a valid job: %v", n, err)
			}
			if _, ok := q.(driver.Grouper); ok && driver.GroupKeyOf(j) != "" {
				// A group member waits in its group: Purge finds it there.
				if k, err := q.Purge(t.Context(), want.Queue); err != nil || k != 1 {
					t.Fatalf("%s: Purge after pushing a group member = %d, %v; want 1", n, k, err)
				}
				continue
			}
			got, err := q.Reserve(t.Context(), []string{want.Queue}, 2, time.Minute)
			if err != nil || len(got) != 1 || got[0].ID != j.ID {
				t.Fatalf("%s: Reserve after Push = %d jobs, %v; want the pushed job alone", n, len(got), err)
			}
			r := got[0]
			switch {
			case r.Queue != want.Queue, r.Name != want.Name, r.UniqueKey != want.UniqueKey,
				r.Priority != want.Priority, r.MaxAttempts != want.MaxAttempts:
				t.Errorf("%s: reserved queue %q name %q key %q priority %d max %d; pushed %q %q %q %d %d", n,
					r.Queue, r.Name, r.UniqueKey, r.Priority, r.MaxAttempts, want.Queue, want.Name, want.UniqueKey, want.Priority, want.MaxAttempts)
			case !bytes.Equal(r.Payload, want.Payload):
				t.Errorf("%s: payload of %d bytes came back as %d bytes (%q...)", n, len(want.Payload), len(r.Payload), r.Payload[:min(len(r.Payload), 16)])
			case !slices.Equal(r.Tags, want.Tags), !maps.Equal(r.Meta, want.Meta):
				t.Errorf("%s: tags %q meta %q came back as %q %q", n, want.Tags, want.Meta, r.Tags, r.Meta)
			}
			if err := ackLease(t.Context(), q, r.Lease()); err != nil {
				t.Fatalf("%s: Ack: %v", n, err)
			}
		}
	})
}
