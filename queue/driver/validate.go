package driver

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// ErrInvalid reports a job that Push or PushMany refused before storing
// anything, because a field is beyond a limit every driver enforces the
// same way. Retrying the same job cannot succeed. The error is a
// *ValidationError naming the field and the limit.
var ErrInvalid = errors.New("queue: invalid job")

// The limits every driver enforces at push (see Validate). They are the
// smallest the stores allow, so a job accepted by one driver is accepted by
// every other: MariaDB keeps IDs, queue names, job names and unique keys in
// VARCHAR(255) and tags and meta in TEXT (64 KiB), PostgreSQL rejects NUL
// bytes and invalid UTF-8 in text, and priority and max attempts are 32-bit
// integer columns.
const (
	// MaxKeyBytes bounds ID, Queue, Name and UniqueKey, in bytes of UTF-8.
	MaxKeyBytes = 255
	// MaxTagsBytes bounds Tags as the JSON array SQL drivers store.
	MaxTagsBytes = 65535
	// MaxMetaBytes bounds Meta as the JSON object SQL drivers store.
	MaxMetaBytes = 65535
	// MinPriority and MaxPriority bound Priority.
	MinPriority = math.MinInt32
	MaxPriority = math.MaxInt32
	// MaxMaxAttempts bounds MaxAttempts, which may not be negative.
	MaxMaxAttempts = math.MaxInt32
)

// ValidationError is the error Validate and ValidateBatch return, and so
// the error every driver's Push and PushMany return for a job beyond a
// limit. It matches ErrInvalid with errors.Is.
type ValidationError struct {
	// Index is the job's position in a PushMany batch, or -1 for Push.
	Index int
	// JobID is the job's ID as given (empty if the caller left it empty).
	JobID string
	// Field names the Job field at fault: "ID", "Queue", "Name",
	// "UniqueKey", "Priority", "MaxAttempts", "Tags" or "Meta".
	Field string
	// Limit states the rule the field broke, for example
	// "at most 255 bytes of UTF-8 without NUL".
	Limit string
	// Got describes the value that broke it, for example "300 bytes".
	Got string
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("queue: invalid job")
	if e.Index >= 0 {
		fmt.Fprintf(&b, " at index %d", e.Index)
	}
	if e.JobID != "" && e.Field != "ID" {
		fmt.Fprintf(&b, " %s", e.JobID)
	}
	fmt.Fprintf(&b, ": %s must be %s, got %s", e.Field, e.Limit, e.Got)
	return b.String()
}

// Is makes a ValidationError match ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

const keyLimit = "at most 255 bytes of UTF-8 without NUL"

// Validate checks j against the limits every driver enforces (MaxKeyBytes
// and the others above) and returns a *ValidationError for the first field
// beyond one, or nil. Drivers call it once at the top of Push; custom
// drivers should too, so that a job is refused the same way everywhere:
//
//   - ID, Queue, Name and UniqueKey: at most MaxKeyBytes bytes of valid
//     UTF-8 without NUL (empty ID and Queue are allowed: Push fills them in);
//   - Priority: within int32; MaxAttempts: 0 to MaxInt32;
//   - Tags and Meta: valid UTF-8 (NUL is allowed: it is stored escaped),
//     and at most MaxTagsBytes / MaxMetaBytes bytes as JSON.
//
// Payload has no limit here: it is bytes, stored as given, up to what the
// store takes in one statement (see docs/semantics.md).
func Validate(j Job) error {
	if err := validate(j); err != nil {
		err.Index = -1
		return err
	}
	return nil
}

// ValidateBatch checks every job of a PushMany batch with Validate's rules
// and returns a *ValidationError whose Index names the first bad job, or
// nil. Drivers call it once at the top of PushMany, so a batch with one bad
// job stores nothing.
func ValidateBatch(jobs []Job) error {
	for i := range jobs {
		if err := validate(jobs[i]); err != nil {
			err.Index = i
			return err
		}
	}
	return nil
}

func validate(j Job) *ValidationError {
	bad := func(field, limit, got string) *ValidationError {
		return &ValidationError{JobID: j.ID, Field: field, Limit: limit, Got: got}
	}
	for _, f := range [...]struct{ name, v string }{
		{"ID", j.ID}, {"Queue", j.Queue}, {"Name", j.Name}, {"UniqueKey", j.UniqueKey},
	} {
		if got := checkKey(f.v); got != "" {
			return bad(f.name, keyLimit, got)
		}
	}
	if j.Priority < MinPriority || j.Priority > MaxPriority {
		return bad("Priority", "within int32 (-2147483648 to 2147483647)", fmt.Sprint(j.Priority))
	}
	if j.MaxAttempts < 0 || j.MaxAttempts > MaxMaxAttempts {
		return bad("MaxAttempts", "0 to 2147483647", fmt.Sprint(j.MaxAttempts))
	}
	if len(j.Tags) > 0 {
		n := 1 // [
		for i, tag := range j.Tags {
			if !utf8.ValidString(tag) {
				return bad("Tags", "valid UTF-8", fmt.Sprintf("invalid UTF-8 in tag %d", i))
			}
			n += jsonStringLen(tag) + 1 // , or ]
		}
		if n > MaxTagsBytes {
			return bad("Tags", "at most 65535 bytes as a JSON array", fmt.Sprintf("%d bytes", n))
		}
	}
	if len(j.Meta) > 0 {
		n := 1 // {
		for k, v := range j.Meta {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return bad("Meta", "valid UTF-8", fmt.Sprintf("invalid UTF-8 in key or value of %q", strings.ToValidUTF8(k, "\uFFFD")))
			}
			n += jsonStringLen(k) + 1 + jsonStringLen(v) + 1 // : and , or }
		}
		if n > MaxMetaBytes {
			return bad("Meta", "at most 65535 bytes as a JSON object", fmt.Sprintf("%d bytes", n))
		}
	}
	return nil
}

// checkKey describes what is wrong with an ID-like string, or returns "".
func checkKey(s string) string {
	switch {
	case len(s) > MaxKeyBytes:
		return fmt.Sprintf("%d bytes", len(s))
	case !utf8.ValidString(s):
		return "invalid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "a NUL byte"
	}
	return ""
}

// jsonStringLen is the length of s, valid UTF-8, as encoding/json writes it
// (with HTML escaping, its default), quotes included.
func jsonStringLen(s string) int {
	n := 2
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
			n += 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}
