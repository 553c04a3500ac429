package queue

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"
)

// fuzzTarget is the job type FuzzHandleDecode decodes into: fields of the
// kinds job structs have.
type fuzzTarget struct {
	ID    uint64            `json:"id"`
	Name  string            `json:"name"`
	Score float64           `json:"score"`
	Tags  []string          `json:"tags"`
	Meta  map[string]string `json:"meta"`
	At    time.Time         `json:"at"`
	Inner *struct{ N int8 } `json:"inner"`
}

// FuzzHandleDecode checks the handler Handle registers on any payload: it
// calls the function exactly when the payload decodes, and otherwise
// returns a permanent ErrDecode, never a panic.
func FuzzHandleDecode(f *testing.F) {
	for _, seed := range []string{
		`{"id":1,"name":"ada","score":1.5,"tags":["a"],"meta":{"k":"v"},"at":"2026-11-24T03:00:00Z","inner":{"N":3}}`,
		`{}`, `null`, `[]`, `{"id":-1}`, `{"inner":{"N":300}}`, `{"at":"yesterday"}`, "\x00", "", `{"name":"\ud800"}`, `{"id":1e400}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		w := NewWorker(nil)
		called := false
		Handle(w, func(ctx context.Context, v fuzzTarget) error { called = true; return nil })
		h := w.handlers[NameOf[fuzzTarget]()]
		err := h(context.Background(), Job{ID: "j", Payload: payload})
		var v fuzzTarget
		decodes := json.Unmarshal(payload, &v) == nil
		switch {
		case decodes && (err != nil || !called):
			t.Fatalf("payload %q decodes, but the handler returned %v (called %v)", payload, err, called)
		case !decodes && (called || !errors.Is(err, ErrDecode) || !IsPermanent(err)):
			t.Fatalf("payload %q does not decode, but the handler returned %v (called %v)", payload, err, called)
		}
	})
}

// FuzzCron checks cron schedules on any expression: one that Periodic
// accepts gives ticks that move forward (or none), in its time zone; one it
// refuses is an ErrConfig. Neither panics or loops.
func FuzzCron(f *testing.F) {
	for _, seed := range []string{
		"0 3 * * *", "*/5 * * * *", "@daily", "@every 1h30m", "@every 1s", "CRON_TZ=Europe/Paris 0 3 * * *",
		"0 0 30 2 *", "59 23 31 12 *", "61 * * * *", "* * * *", "", "@reboot", "0 0 * * 7", "1-5/2 * * * MON-FRI",
		"TZ=Nowhere/City 0 * * * *", "@every -1s", "@every 0s",
	} {
		f.Add(seed, int64(1795000000))
	}
	f.Fuzz(func(t *testing.T, expr string, unix int64) {
		from := time.Unix(unix%(1<<33), 0).UTC() // years 1697 to 2242
		s := Cron(expr)
		err := validateSchedule(s)
		if err != nil {
			return
		}
		next := s.Next(from)
		if next.IsZero() {
			return
		}
		if !next.After(from) {
			t.Fatalf("Cron(%q).Next(%s) = %s, not after it", expr, from, next)
		}
		if after := s.Next(next); !after.IsZero() && !after.After(next) {
			t.Fatalf("Cron(%q): the tick after %s is %s", expr, next, after)
		}
		// The last tick up to next is next itself when the look-back (a
		// year) reaches from; beyond that, from (nothing missed) or a tick
		// in between, never a time before from.
		got := lastTick(s, from, next)
		if next.Sub(from) <= 360*24*time.Hour && !got.Equal(next) {
			t.Fatalf("Cron(%q): the last tick in (%s, %s] is %s, want %s", expr, from, next, got, next)
		}
		if got.Before(from) || got.After(next) {
			t.Fatalf("Cron(%q): the last tick in (%s, %s] is %s, outside it", expr, from, next, got)
		}
		_ = s.String()
	})
}

// uniqueTarget is the job type FuzzUniqueByFields keys: two fields that
// identify it and one that does not.
type uniqueTarget struct {
	Account string  `json:"account" meridian:"unique"`
	Amount  float64 `meridian:"unique"`
	Note    string  `json:"note"`
}

// FuzzUniqueByFields checks UniqueByPayload's key on a type with unique
// fields, for any values: values equal in those fields have one key
// whatever the other field holds, and values whose unique fields encode
// differently have different keys; it never panics.
func FuzzUniqueByFields(f *testing.F) {
	f.Add("acct-1", 12.5, "a", "b", "acct-2", 12.5)
	f.Add("", 0.0, "", "\x00", "\ufffd", math.Copysign(0, -1))
	f.Add("x\x00y", 1e300, "note", "", "x", 1e300)
	f.Fuzz(func(t *testing.T, account string, amount float64, note1, note2, account2 string, amount2 float64) {
		key := func(v uniqueTarget) (string, bool) {
			j, err := NewJob(v, UniqueByPayload())
			if err != nil {
				// Only a value encoding/json refuses (NaN, ±Inf) may fail.
				if _, jerr := json.Marshal(v); jerr == nil {
					t.Fatalf("NewJob(%+v) = %v, but the value encodes", v, err)
				}
				return "", false
			}
			return j.UniqueKey, true
		}
		a, ok := key(uniqueTarget{account, amount, note1})
		if !ok {
			return
		}
		if b, _ := key(uniqueTarget{account, amount, note2}); a != b {
			t.Fatalf("notes %q and %q gave keys %s and %s: the note is no unique field", note1, note2, a, b)
		}
		c, ok := key(uniqueTarget{account2, amount2, note1})
		if !ok {
			return
		}
		e1, _ := json.Marshal([]any{account, amount})
		e2, _ := json.Marshal([]any{account2, amount2})
		if (a == c) != (string(e1) == string(e2)) {
			t.Fatalf("unique fields %s and %s gave keys %s and %s", e1, e2, a, c)
		}
	})
}
