package queue

import "time"

// EventKind says what happened to a job in the worker.
type EventKind int

// The events a Worker reports to its Observer.
const (
	EventStarted   EventKind = iota // a handler started an attempt
	EventDone                       // the attempt succeeded and the job was acked
	EventRetried                    // the attempt failed and the job was nacked for a retry
	EventFailed                     // the job was dead-lettered
	EventLeaseLost                  // the job's lease was lost while the worker held it
	EventAbandoned                  // a handler outlived its timeout and grace; the worker stopped waiting for it
	EventCancelled                  // the job was cancelled while the worker held it, or by its handler
	EventSnoozed                    // the handler snoozed the job; its attempt was given back
)

func (k EventKind) String() string {
	switch k {
	case EventStarted:
		return "started"
	case EventDone:
		return "done"
	case EventRetried:
		return "retried"
	case EventFailed:
		return "failed"
	case EventLeaseLost:
		return "lease-lost"
	case EventAbandoned:
		return "abandoned"
	case EventCancelled:
		return "cancelled"
	case EventSnoozed:
		return "snoozed"
	}
	return "unknown"
}

// Event is one thing that happened to a job in a Worker.
type Event struct {
	Kind    EventKind
	Job     Job
	Err     error         // the attempt's error for Retried and Failed; the cancellation cause for Abandoned
	Runtime time.Duration // the handler's run time, for Done, Retried and Failed
}

// Observer receives the worker's events, for counters and metrics. Observe
// is called from the worker's goroutines, concurrently, and must not block.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(e Event)

// Observe calls f.
func (f ObserverFunc) Observe(e Event) { f(e) }
