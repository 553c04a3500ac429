package queue_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", driver.MaxKeyBytes+1)
	edge := strings.Repeat("é", driver.MaxKeyBytes/2) // 254 bytes
	bigTags := make([]string, 0, 700)
	for range 700 {
		bigTags = append(bigTags, strings.Repeat("<", 16)) // 16*6+2 bytes each in JSON
	}
	tests := []struct {
		name  string
		job   queue.Job
		field string // "" when valid
	}{
		{"zero job", queue.Job{}, ""},
		{"limits reached, not passed", queue.Job{ID: edge, Queue: edge, Name: edge, UniqueKey: edge,
			Priority: math.MaxInt32, MaxAttempts: math.MaxInt32, Tags: []string{"a\x00b"}, Meta: map[string]string{"k": "v\x00"}}, ""},
		{"lowest priority", queue.Job{Priority: math.MinInt32}, ""},
		{"long ID", queue.Job{ID: long}, "ID"},
		{"long queue", queue.Job{Queue: long}, "Queue"},
		{"long name", queue.Job{Name: long}, "Name"},
		{"long unique key", queue.Job{UniqueKey: long}, "UniqueKey"},
		{"NUL in queue", queue.Job{Queue: "a\x00"}, "Queue"},
		{"invalid UTF-8 in unique key", queue.Job{UniqueKey: "a\xff"}, "UniqueKey"},
		{"priority above int32", queue.Job{Priority: math.MaxInt32 + 1}, "Priority"},
		{"priority below int32", queue.Job{Priority: math.MinInt32 - 1}, "Priority"},
		{"negative max attempts", queue.Job{MaxAttempts: -1}, "MaxAttempts"},
		{"max attempts above int32", queue.Job{MaxAttempts: math.MaxInt32 + 1}, "MaxAttempts"},
		{"invalid UTF-8 tag", queue.Job{Tags: []string{"ok", "\xc3"}}, "Tags"},
		{"tags over 64 KiB as JSON", queue.Job{Tags: bigTags}, "Tags"},
		{"invalid UTF-8 meta value", queue.Job{Meta: map[string]string{"k": "\xff"}}, "Meta"},
		{"invalid UTF-8 meta key", queue.Job{Meta: map[string]string{"\xff": "v"}}, "Meta"},
		{"meta over 64 KiB", queue.Job{Meta: map[string]string{"k": strings.Repeat("x", driver.MaxMetaBytes)}}, "Meta"},
		{"unique states", queue.Job{UniqueKey: "k", UniqueStates: []driver.JobState{queue.StateDone, queue.StateDead, queue.StateCancelled}}, ""},
		{"unique states without a key", queue.Job{UniqueStates: []driver.JobState{queue.StateDead}}, "UniqueStates"},
		{"an active unique state", queue.Job{UniqueKey: "k", UniqueStates: []driver.JobState{queue.StateReady}}, "UniqueStates"},
		{"an unknown unique state", queue.Job{UniqueKey: "k", UniqueStates: []driver.JobState{"Dead"}}, "UniqueStates"},
		{"actions up to the history's length", queue.Job{Actions: make([]driver.Action, driver.MaxHistory)}, ""},
		{"more actions than the history keeps", queue.Job{Actions: make([]driver.Action, driver.MaxHistory+1)}, "Actions"},
		{"invalid UTF-8 in an action", queue.Job{Actions: []driver.Action{{By: "ops", What: "a\xff"}}}, "Actions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := driver.Validate(tt.job)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var ve *driver.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, queue.ErrInvalid) {
				t.Fatalf("Validate = %v, want a *ValidationError matching ErrInvalid", err)
			}
			if ve.Field != tt.field || ve.Index != -1 || ve.Limit == "" || ve.Got == "" {
				t.Errorf("Validate = %+v, want Field %q, Index -1, a Limit and a Got", ve, tt.field)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("message %q does not name the field %s", err, tt.field)
			}
		})
	}
}

func TestValidateBatchNamesIndex(t *testing.T) {
	t.Parallel()
	jobs := []queue.Job{{ID: "a"}, {ID: "b"}, {ID: "c", Priority: 1 << 40}, {ID: strings.Repeat("d", 300)}}
	err := driver.ValidateBatch(jobs)
	var ve *driver.ValidationError
	if !errors.As(err, &ve) || ve.Index != 2 || ve.Field != "Priority" || ve.JobID != "c" {
		t.Fatalf("ValidateBatch = %#v, want index 2, Priority, job c", err)
	}
	if !strings.Contains(err.Error(), "index 2") {
		t.Errorf("message %q does not name the index", err)
	}
	if err := driver.ValidateBatch(jobs[:2]); err != nil {
		t.Errorf("ValidateBatch of good jobs = %v", err)
	}
}

// The size check must count what encoding/json writes, since that is what
// SQL drivers store.
func TestValidateCountsJSONBytes(t *testing.T) {
	t.Parallel()
	samples := []string{"", "plain", "quote\" back\\", "\n\r\t\b\f", "\x00\x01\x1f", "<a&b>", "\u2028\u2029", "Zoë 日本 🙂", "\x7f"}
	for _, s := range samples {
		b, _ := json.Marshal([]string{s})
		// One tag: its JSON array is the limit exactly, then one byte over.
		pad := strings.Repeat("x", driver.MaxTagsBytes-len(b))
		if err := driver.Validate(queue.Job{Tags: []string{s + pad}}); err != nil {
			t.Errorf("tag %q padded to exactly %d JSON bytes: %v", s, driver.MaxTagsBytes, err)
		}
		if err := driver.Validate(queue.Job{Tags: []string{s + pad + "x"}}); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("tag %q padded to %d JSON bytes: %v, want ErrInvalid", s, driver.MaxTagsBytes+1, err)
		}
		m, _ := json.Marshal(map[string]string{s: s, "k": "v"})
		mpad := strings.Repeat("y", driver.MaxMetaBytes-len(m))
		if err := driver.Validate(queue.Job{Meta: map[string]string{s: s, "k": "v" + mpad}}); err != nil {
			t.Errorf("meta %q padded to exactly %d JSON bytes: %v", s, driver.MaxMetaBytes, err)
		}
		if err := driver.Validate(queue.Job{Meta: map[string]string{s: s, "k": "v" + mpad + "y"}}); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("meta %q padded one byte over: %v, want ErrInvalid", s, err)
		}
	}
}
