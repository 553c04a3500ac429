package contracttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// limitCase is one field beyond one of driver.Validate's limits.
type limitCase struct {
	name  string
	field string
	set   func(j *queue.Job)
}

var (
	overKey = strings.Repeat("k", driver.MaxKeyBytes+1)
	// atKey is exactly MaxKeyBytes bytes, mostly two-byte characters, so a
	// store counting characters and one counting bytes both meet it.
	atKey = strings.Repeat("é", driver.MaxKeyBytes/2) + "k"
)

var limitCases = []limitCase{
	{"IDOver255Bytes", "ID", func(j *queue.Job) { j.ID = overKey }},
	{"IDWithNUL", "ID", func(j *queue.Job) { j.ID = "id\x00" + j.ID }},
	{"QueueOver255Bytes", "Queue", func(j *queue.Job) { j.Queue = overKey }},
	{"QueueInvalidUTF8", "Queue", func(j *queue.Job) { j.Queue = "limits\xff" }},
	{"NameOver255Bytes", "Name", func(j *queue.Job) { j.Name = overKey }},
	{"UniqueKeyOver255Bytes", "UniqueKey", func(j *queue.Job) { j.UniqueKey = overKey }},
	{"UniqueKeyOver2700Bytes", "UniqueKey", func(j *queue.Job) { j.UniqueKey = strings.Repeat("u", 3000) }},
	{"UniqueKeyWithNUL", "UniqueKey", func(j *queue.Job) { j.UniqueKey = "a\x00b" }},
	{"PriorityAboveInt32", "Priority", func(j *queue.Job) { j.Priority = math.MaxInt32 + 1 }},
	{"PriorityBelowInt32", "Priority", func(j *queue.Job) { j.Priority = math.MinInt32 - 1 }},
	{"MaxAttemptsAboveInt32", "MaxAttempts", func(j *queue.Job) { j.MaxAttempts = math.MaxInt32 + 1 }},
	{"MaxAttemptsNegative", "MaxAttempts", func(j *queue.Job) { j.MaxAttempts = -1 }},
	{"TagsOver64KiB", "Tags", func(j *queue.Job) { j.Tags = []string{strings.Repeat("t", driver.MaxTagsBytes)} }},
	{"TagInvalidUTF8", "Tags", func(j *queue.Job) { j.Tags = []string{"ok", "bad\xc3"} }},
	{"MetaOver64KiB", "Meta", func(j *queue.Job) { j.Meta = map[string]string{"k": strings.Repeat("m", driver.MaxMetaBytes)} }},
	{"MetaInvalidUTF8", "Meta", func(j *queue.Job) { j.Meta = map[string]string{"k": "bad\xff"} }},
}

// testLimits checks that every driver refuses the same jobs at push, with
// a *driver.ValidationError naming the field, storing nothing; and that a
// job at every limit is stored and read back intact.
func (s *suite) testLimits(t *testing.T) {
	for _, c := range limitCases {
		s.check(t, "Push/"+c.name, func(t *testing.T, q queue.Queue) {
			j := newJob("limits")
			c.set(&j)
			wantInvalid(t, "Push", q.Push(t.Context(), j), c.field, -1)
			wantLen(t, q, "limits", 0)
		})
	}

	s.check(t, "AtLimitsRoundTrip", func(t *testing.T, q queue.Queue) {
		j := atLimits()
		push(t, q, j)
		got := reserveOne(t, q, j.Queue, j.ID, longLease)
		if got.Name != j.Name || got.UniqueKey != j.UniqueKey || got.Priority != j.Priority || got.MaxAttempts != j.MaxAttempts {
			t.Errorf("reserved job's Name, UniqueKey, Priority, MaxAttempts = %q, %q, %d, %d; want the pushed values",
				got.Name, got.UniqueKey, got.Priority, got.MaxAttempts)
		}
		if !slices.Equal(got.Tags, j.Tags) {
			t.Errorf("Tags at the limit did not round-trip (got %d tags, want %d)", len(got.Tags), len(j.Tags))
		}
		if !maps.Equal(got.Meta, j.Meta) {
			t.Errorf("Meta at the limit did not round-trip (got %d keys, want %d)", len(got.Meta), len(j.Meta))
		}
		if !bytes.Equal(got.Payload, j.Payload) {
			t.Errorf("Payload = %q, want %q", got.Payload, j.Payload)
		}
	})

	s.check(t, "LowestPriority", func(t *testing.T, q queue.Queue) {
		j := newJob("limits")
		j.Priority = math.MinInt32
		push(t, q, j)
		if got := reserveOne(t, q, "limits", j.ID, longLease); got.Priority != math.MinInt32 {
			t.Errorf("Priority = %d, want %d", got.Priority, math.MinInt32)
		}
	})

	checkAs(s, t, "PushManyStoresNothing", func(t *testing.T, q queue.Queue, bp driver.BatchPusher) {
		for _, n := range []int{3, 300} { // 300: past the PostgreSQL COPY threshold
			jobs := make([]queue.Job, n)
			for i := range jobs {
				jobs[i] = newJob("limits")
			}
			bad := n - 2
			jobs[bad].Tags = []string{"\xff"}
			stored, err := bp.PushMany(t.Context(), jobs)
			wantInvalid(t, "PushMany", err, "Tags", bad)
			if countTrue(stored) != 0 {
				t.Errorf("PushMany of %d jobs with a bad one reported %d stored, want 0", n, countTrue(stored))
			}
			wantLen(t, q, "limits", 0)
		}
	})

	if s.h.Tx != nil {
		s.check(t, "TxPushRefused", func(t *testing.T, q queue.Queue) {
			p, commit, _ := s.h.Tx(t, q)
			j := newJob("limits")
			j.Priority = math.MaxInt32 + 1
			wantInvalid(t, "Push in a transaction", p.Push(t.Context(), j), "Priority", -1)
			ok := newJob("limits")
			push(t, p, ok) // the transaction is still usable
			if err := commit(); err != nil {
				t.Fatalf("commit after a refused push: %v", err)
			}
			reserveOne(t, q, "limits", ok.ID, longLease)
		})
	}
}

// atLimits returns a job whose every limited field is exactly at its limit.
func atLimits() queue.Job {
	j := newJob(atKey)
	j.ID = strings.Repeat("i", driver.MaxKeyBytes-len(j.ID)) + j.ID
	j.Name = atKey
	j.UniqueKey = atKey
	j.Priority = math.MaxInt32
	j.MaxAttempts = math.MaxInt32
	// Tags and Meta with NUL, HTML characters and multi-byte text, padded
	// to exactly the limit as JSON.
	tags := []string{"nul\x00", "<&>", "日本 🙂"}
	b, _ := json.Marshal(tags)
	tags = append(tags, strings.Repeat("x", driver.MaxTagsBytes-len(b)-3)) // -3: ,""
	j.Tags = tags
	meta := map[string]string{"nul": "a\x00b", "trace": "<&>日本", "pad": ""}
	b, _ = json.Marshal(meta)
	meta["pad"] = strings.Repeat("y", driver.MaxMetaBytes-len(b))
	j.Meta = meta
	return j
}

// wantInvalid fails unless err is a *driver.ValidationError for field at
// index (-1 for Push) that matches queue.ErrInvalid.
func wantInvalid(t *testing.T, what string, err error, field string, index int) {
	t.Helper()
	var ve *driver.ValidationError
	switch {
	case err == nil:
		t.Fatalf("%s of a job with a bad %s succeeded, want a *driver.ValidationError", what, field)
	case !errors.Is(err, queue.ErrInvalid) || !errors.As(err, &ve):
		t.Fatalf("%s of a job with a bad %s: %v, want a *driver.ValidationError matching queue.ErrInvalid", what, field, err)
	case ve.Field != field || ve.Index != index:
		t.Fatalf("%s: error names field %q at index %d, want %q at %d (%v)", what, ve.Field, ve.Index, field, index, err)
	}
}
