package driver

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The bounds of monitored tags, the same on every store (CheckTag).
const (
	// MaxTaggedJobs is how many jobs a store keeps per monitored tag and
	// list: the last MaxTaggedJobs jobs recorded under the tag, and apart
	// from them the last MaxTaggedJobs of those that failed (dead
	// letters), so that a burst of successes does not push the failures
	// out. Older records are dropped as new ones come.
	MaxTaggedJobs = 1000
	// MaxMonitoredTags is how many tags a store monitors at once.
	MaxMonitoredTags = 100
)

// TagMonitor is a store that keeps the recent jobs of monitored tags apart
// from its retention of finished jobs, as Laravel Horizon does: an
// operator monitors a tag, and the jobs carrying it that the Worker
// finishes from then on are recorded (ID, queue, name, state, when, and
// the error of a failed attempt) in two bounded lists per tag, which stay
// readable after the store prunes the jobs themselves. The Worker records
// them in batches, at most once a second, and does nothing per job while
// no tag is monitored (see queue.Worker).
type TagMonitor interface {
	// MonitorTag starts monitoring tag. Monitoring a monitored tag
	// changes nothing. It returns an error matching ErrInvalid when tag
	// breaks CheckTag, or when MaxMonitoredTags tags are monitored already.
	MonitorTag(ctx context.Context, tag string) error
	// UnmonitorTag stops monitoring tag and drops its records. Stopping a
	// tag not monitored is not an error.
	UnmonitorTag(ctx context.Context, tag string) error
	// MonitoredTags lists the monitored tags, sorted.
	MonitoredTags(ctx context.Context) ([]string, error)
	// RecordTagged records jobs, each under its Tag, replacing an earlier
	// record of the same job under the same tag. Records of a tag not
	// monitored are dropped. Each tag's lists keep their last
	// MaxTaggedJobs records by At; a record in StateDead goes to the
	// failed list as well.
	RecordTagged(ctx context.Context, jobs []TaggedJob) error
	// TaggedJobs returns tag's records, newest first (by At, then by ID
	// descending): the recent list, or the failed one when failed is set.
	// A tag not monitored has none.
	TaggedJobs(ctx context.Context, tag string, failed bool) ([]TaggedJob, error)
}

// TaggedJob is what a TagMonitor keeps of a job under a monitored tag:
// what is known when its attempt ended, so it reads the same once the
// store has pruned the job.
type TaggedJob struct {
	Tag   string
	ID    string
	Queue string
	Name  string
	// State is the state the attempt left the job in: StateDone,
	// StateScheduled (retried later), StateDead or StateCancelled.
	State JobState
	// At is when the attempt ended.
	At       time.Time
	Attempts int
	// Error is the attempt's error, "" when it succeeded.
	Error string
}

// CheckTag returns nil when tag may be monitored: at most MaxKeyBytes bytes
// of UTF-8, not empty, without NUL. Otherwise it returns an error matching
// ErrInvalid that says why. Every TagMonitor checks it.
func CheckTag(tag string) error {
	switch {
	case tag == "":
		return fmt.Errorf("queue: a monitored tag must not be empty: %w", ErrInvalid)
	case len(tag) > MaxKeyBytes:
		return fmt.Errorf("queue: a monitored tag must be at most %d bytes, got %d: %w", MaxKeyBytes, len(tag), ErrInvalid)
	case !utf8.ValidString(tag) || strings.ContainsRune(tag, 0):
		return fmt.Errorf("queue: a monitored tag must be UTF-8 without NUL: %w", ErrInvalid)
	}
	return nil
}

// ErrTooManyTags is the error a TagMonitor returns from MonitorTag when
// MaxMonitoredTags tags are monitored already. It matches ErrInvalid.
var ErrTooManyTags = fmt.Errorf("queue: at most %d tags are monitored at once: %w", MaxMonitoredTags, ErrInvalid)
