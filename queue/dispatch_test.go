package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

type namedJob struct{ N int }

func (namedJob) JobName() string { return "reports.nightly" }

type ptrNamed struct{}

func (*ptrNamed) JobName() string { return "by-pointer" }

func TestNameOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		got, want string
	}{
		{queue.NameOf[Greet](), "Greet"},
		{queue.NameOf[*Greet](), "Greet"},
		{queue.NameOf[namedJob](), "reports.nightly"},
		{queue.NameOf[ptrNamed](), "by-pointer"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("NameOf = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestNewJobOptions(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	j, err := queue.NewJob(Greet{Name: "x"},
		queue.OnQueue("mail"), queue.At(at), queue.Priority(7), queue.Unique("k"),
		queue.MaxAttempts(9), queue.Timeout(time.Minute), queue.Tags("a", "b"), queue.Meta("trace", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	var g Greet
	if err := json.Unmarshal(j.Payload, &g); err != nil || g.Name != "x" {
		t.Fatalf("payload %s: %v", j.Payload, err)
	}
	if j.ID == "" || j.Name != "Greet" || j.Queue != "mail" || !j.AvailableAt.Equal(at) || j.Priority != 7 ||
		j.UniqueKey != "k" || j.MaxAttempts != 9 || j.Timeout != time.Minute ||
		len(j.Tags) != 2 || j.Meta["trace"] != "t1" {
		t.Fatalf("job = %+v", j)
	}
	d, _ := queue.NewJob(Greet{})
	if d.Queue != queue.DefaultQueue {
		t.Fatalf("default queue = %q", d.Queue)
	}
	if _, err := queue.NewJob(make(chan int)); err == nil {
		t.Fatal("encoding a channel did not fail")
	}
}

func TestNewIDUniqueAndOrdered(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := driver.NewID()
		if len(id) != 32 || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
		if prev != "" && id[:12] < prev[:12] {
			t.Fatalf("ids not time-ordered: %s after %s", id, prev)
		}
		prev = id
	}
}

// TestUniqueStatesOptions checks how the unique options combine the
// states they name: each state once, in the order first named, whatever
// mode gives the key.
func TestUniqueStatesOptions(t *testing.T) {
	t.Parallel()
	done, dead := queue.StateDone, queue.StateDead
	tests := []struct {
		name    string
		opts    []queue.Option
		wantKey bool
		want    []driver.JobState
	}{
		{"none", []queue.Option{queue.Unique("k")}, true, nil},
		{"unique", []queue.Option{queue.Unique("k", dead, done)}, true, []driver.JobState{dead, done}},
		{"repeats kept once", []queue.Option{queue.Unique("k", dead, dead), queue.Unique("k", done, dead)}, true, []driver.JobState{dead, done}},
		{"by payload", []queue.Option{queue.UniqueByPayload(done)}, true, []driver.JobState{done}},
		{"with a period", []queue.Option{queue.UniqueByPayload(dead), queue.UniqueFor("", time.Hour)}, true, []driver.JobState{dead}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := queue.NewJob(SendWelcomeEmail{UserID: 1}, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if (j.UniqueKey != "") != tt.wantKey || !slices.Equal(j.UniqueStates, tt.want) {
				t.Fatalf("key %q, states %v; want states %v", j.UniqueKey, j.UniqueStates, tt.want)
			}
			if err := driver.Validate(j); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestDispatchUniqueDuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	id, dup, err := queue.Enqueue(ctx, q, Greet{}, queue.Unique("greet:1"))
	if err != nil || dup || id == "" {
		t.Fatalf("first Enqueue = %q, %v, %v", id, dup, err)
	}
	if err := queue.Dispatch(ctx, q, Greet{}, queue.Unique("greet:1")); err != nil {
		t.Fatalf("Dispatch of a duplicate = %v, want nil", err)
	}
	id2, dup, err := queue.Enqueue(ctx, q, Greet{}, queue.Unique("greet:1"))
	if err != nil || !dup {
		t.Fatalf("second Enqueue = %q, %v, %v; want a duplicate", id2, dup, err)
	}
	var de *driver.DuplicateError
	if err := q.Push(ctx, queue.Job{Name: "Greet", UniqueKey: "greet:1"}); !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("Push duplicate = %v, want ErrDuplicate", err)
	} else if errors.As(err, &de) && de.ExistingID != "" && de.ExistingID != id {
		t.Fatalf("DuplicateError names %s, want %s", de.ExistingID, id)
	}
	if n := length(t, q); n != 1 {
		t.Fatalf("Len = %d, want 1", n)
	}
}

func TestDispatchMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	vs := make([]Greet, 1000)
	n, err := queue.DispatchMany(ctx, q, vs, queue.OnQueue("bulk"))
	if err != nil || n != 1000 {
		t.Fatalf("DispatchMany = %d, %v", n, err)
	}
	if got, _ := q.Len(ctx, "bulk"); got != 1000 {
		t.Fatalf("Len(bulk) = %d", got)
	}
}

func TestDispatchDelayAndAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New()
	if err := queue.Dispatch(ctx, q, Greet{}, queue.Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := queue.Dispatch(ctx, q, Greet{}, queue.At(time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Reserve(ctx, nil, 10, time.Minute)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("delayed jobs delivered early: %v, %v", jobs, err)
	}
}

func TestBackoffPolicies(t *testing.T) {
	t.Parallel()
	s := time.Second
	tests := []struct {
		name    string
		p       queue.BackoffPolicy
		attempt int
		lo, hi  time.Duration
	}{
		{"fixed", queue.Fixed(3 * s), 7, 3 * s, 3 * s},
		{"delays first", queue.Delays(s, 5*s, 10*s), 1, s, s},
		{"delays second", queue.Delays(s, 5*s, 10*s), 2, 5 * s, 5 * s},
		{"delays last repeats", queue.Delays(s, 5*s, 10*s), 9, 10 * s, 10 * s},
		{"delays empty", queue.Delays(), 3, 0, 0},
		{"exponential first", queue.Exponential(s, time.Hour), 1, s / 2, s},
		{"exponential grows", queue.Exponential(s, time.Hour), 4, 4 * s, 8 * s},
		{"exponential capped", queue.Exponential(s, 10*s), 30, 5 * s, 10 * s},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for range 50 {
				d := tc.p.Backoff(tc.attempt)
				if d < tc.lo || d > tc.hi {
					t.Fatalf("Backoff(%d) = %s, want in [%s, %s]", tc.attempt, d, tc.lo, tc.hi)
				}
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	base := errors.New("bad input")
	p := queue.Permanent(base)
	if !queue.IsPermanent(p) || !errors.Is(p, base) || queue.IsPermanent(base) || queue.Permanent(nil) != nil {
		t.Fatal("Permanent does not wrap as documented")
	}
}

func TestOpenUnknownScheme(t *testing.T) {
	t.Parallel()
	if _, err := queue.Open(context.Background(), "nosuch://x"); err == nil {
		t.Fatal("Open of an unregistered scheme succeeded")
	}
	q, err := queue.Open(context.Background(), "memory://")
	if err != nil || q == nil {
		t.Fatalf("Open(memory://) = %v, %v", q, err)
	}
}

func TestPerMinute(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		n    int64
		now  time.Time
		want float64
	}{
		{0, base, 0},
		{500, base, 100},                        // five whole minutes
		{600, base.Add(time.Minute), 120},       // exactly on a boundary again
		{550, base.Add(30 * time.Second), 100},  // five and a half minutes
		{55, base.Add(150 * time.Second), 10.0}, // 5.5 minutes span
	}
	for _, tc := range tests {
		if got := driver.PerMinute(tc.n, tc.now); got != tc.want {
			t.Errorf("PerMinute(%d, %s) = %v, want %v", tc.n, tc.now.Format(time.TimeOnly), got, tc.want)
		}
	}
}

// Jobs whose unique key UniqueByPayload derives from their fields.
type (
	invoiceReminder struct {
		InvoiceID int64  `json:"invoice_id" meridian:"unique"`
		Tenant    string `meridian:"unique"`
		Message   string `json:"message"`
	}
	badUniqueTag struct {
		ID int `meridian:"uniq"`
	}
	hiddenUnique struct {
		id int `meridian:"unique"`
	}
)

func TestUniqueByPayloadKeys(t *testing.T) {
	t.Parallel()
	key := func(t *testing.T, v any, opts ...queue.Option) queue.Job {
		t.Helper()
		j, err := queue.NewJob(v, append(opts, queue.UniqueByPayload())...)
		if err != nil {
			t.Fatalf("NewJob(%+v) = %v", v, err)
		}
		if len(j.UniqueKey) != len("payload:")+64 || j.UniqueKey[:8] != "payload:" {
			t.Fatalf("key %q is not payload: and a SHA-256", j.UniqueKey)
		}
		return j
	}
	base := invoiceReminder{InvoiceID: 7, Tenant: "acme", Message: "due soon"}
	tests := []struct {
		name string
		a, b any
		same bool
	}{
		{"untagged field differs", base, invoiceReminder{InvoiceID: 7, Tenant: "acme", Message: "overdue"}, true},
		{"tagged field differs", base, invoiceReminder{InvoiceID: 8, Tenant: "acme", Message: "due soon"}, false},
		{"second tagged field differs", base, invoiceReminder{InvoiceID: 7, Tenant: "other", Message: "due soon"}, false},
		{"pointer and value", base, &base, true},
		{"no tags: the whole payload", Greet{Name: "a"}, Greet{Name: "b"}, false},
		{"no tags: equal payloads", Greet{Name: "a"}, Greet{Name: "a"}, true},
		{"same fields, another type", namedJob{N: 1}, ptrNamed{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := key(t, tt.a), key(t, tt.b)
			if (a.UniqueKey == b.UniqueKey) != tt.same {
				t.Errorf("keys %s and %s: same = %v, want %v", a.UniqueKey, b.UniqueKey, !tt.same, tt.same)
			}
		})
	}

	t.Run("order of options", func(t *testing.T) {
		t.Parallel()
		first := key(t, base)
		for _, opts := range [][]queue.Option{
			{queue.UniqueFor("", time.Hour)},
			{queue.Replace("")},
		} {
			j := key(t, base, opts...)
			if j.UniqueKey != first.UniqueKey {
				t.Errorf("an option before UniqueByPayload changed the key: %s, want %s", j.UniqueKey, first.UniqueKey)
			}
			after, err := queue.NewJob(base, append([]queue.Option{queue.UniqueByPayload()}, opts...)...)
			if err != nil || after.UniqueKey != first.UniqueKey {
				t.Errorf("an option after UniqueByPayload: key %s, %v; want %s", after.UniqueKey, err, first.UniqueKey)
			}
			if after.UniqueFor != j.UniqueFor || after.UniqueReplace != j.UniqueReplace {
				t.Errorf("the mode depends on the order: %v/%v, %v/%v", after.UniqueFor, j.UniqueFor, after.UniqueReplace, j.UniqueReplace)
			}
		}
	})

	t.Run("a key given later wins", func(t *testing.T) {
		t.Parallel()
		j, err := queue.NewJob(base, queue.UniqueByPayload(), queue.Unique("by-hand"))
		if err != nil || j.UniqueKey != "by-hand" {
			t.Errorf("key %q, %v; want by-hand", j.UniqueKey, err)
		}
	})

	for _, bad := range []struct {
		v    any
		want string
	}{
		{badUniqueTag{ID: 1}, `meridian:"uniq"`},
		{hiddenUnique{id: 1}, "not exported"},
	} {
		if _, err := queue.NewJob(bad.v, queue.UniqueByPayload()); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("NewJob(%T) = %v, want an error naming %s", bad.v, err, bad.want)
		}
		if _, err := queue.NewJob(bad.v); err != nil {
			t.Errorf("NewJob(%T) without UniqueByPayload = %v: the tag matters only to it", bad.v, err)
		}
	}
}
