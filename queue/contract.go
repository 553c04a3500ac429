package queue

import "github.com/meridianjobs/meridian/queue/driver"

// The driver contract lives in package driver; these names are kept here
// while the rest of the module moves to it.

type (
	Attempt          = driver.Attempt
	Capabilities     = driver.Capabilities
	Controller       = driver.Controller
	Workflows        = driver.Workflows
	Scheduler        = driver.Scheduler
	Reporter         = driver.Reporter
	BatchDispatcher  = driver.BatchDispatcher
	BatchEvent       = driver.BatchEvent
	BatchFilter      = driver.BatchFilter
	BatchInfo        = driver.BatchInfo
	BatchMember      = driver.BatchMember
	BatchMemberState = driver.BatchMemberState
	BatchPage        = driver.BatchPage
	BatchPusher      = driver.BatchPusher
	BatchRecord      = driver.BatchRecord
	BulkAction       = driver.BulkAction
	Completion       = driver.Completion
	Count            = driver.Count
	DuplicateError   = driver.DuplicateError
	Inspector        = driver.Inspector
	Job              = driver.Job
	JobFilter        = driver.JobFilter
	JobInfo          = driver.JobInfo
	JobPage          = driver.JobPage
	JobState         = driver.JobState
	Fence            = driver.Fence
	Lease            = driver.Lease
	LeaseDefaulter   = driver.LeaseDefaulter
	MemberFilter     = driver.MemberFilter
	MemberPage       = driver.MemberPage
	MetricPoint      = driver.MetricPoint
	Outcome          = driver.Outcome
	PeriodicInfo     = driver.PeriodicInfo
	Pusher           = driver.Pusher
	Queue            = driver.Queue
	QueueCounts      = driver.QueueCounts
	QueueStats       = driver.QueueStats
	RunRecord        = driver.RunRecord
	ValidationError  = driver.ValidationError
	Waiter           = driver.Waiter
	WorkerInfo       = driver.WorkerInfo
)

const (
	BatchCatch        = driver.BatchCatch
	BatchFinally      = driver.BatchFinally
	BatchThen         = driver.BatchThen
	BulkCancel        = driver.BulkCancel
	BulkForget        = driver.BulkForget
	BulkRetry         = driver.BulkRetry
	DefaultQueue      = driver.DefaultQueue
	MaxBatchPage      = driver.MaxBatchPage
	MaxHistory        = driver.MaxHistory
	MaxKeyBytes       = driver.MaxKeyBytes
	MaxLeaseNameBytes = driver.MaxLeaseNameBytes
	MaxMaxAttempts    = driver.MaxMaxAttempts
	MaxMetaBytes      = driver.MaxMetaBytes
	MaxPriority       = driver.MaxPriority
	MaxTagsBytes      = driver.MaxTagsBytes
	MemberCancelled   = driver.MemberCancelled
	MemberDone        = driver.MemberDone
	MemberFailed      = driver.MemberFailed
	MemberPending     = driver.MemberPending
	MetaBatch         = driver.MetaBatch
	MetaBatchError    = driver.MetaBatchError
	MetaBatchEvent    = driver.MetaBatchEvent
	MetaBatchFailed   = driver.MetaBatchFailed
	MetaBatchOf       = driver.MetaBatchOf
	MinPriority       = driver.MinPriority
	OutcomeCancelled  = driver.OutcomeCancelled
	OutcomeDone       = driver.OutcomeDone
	OutcomeFailed     = driver.OutcomeFailed
	OutcomeRetried    = driver.OutcomeRetried
	OutcomeSnoozed    = driver.OutcomeSnoozed
	RateWindow        = driver.RateWindow
	StateCancelled    = driver.StateCancelled
	StateDead         = driver.StateDead
	StateDone         = driver.StateDone
	StateReady        = driver.StateReady
	StateRunning      = driver.StateRunning
	StateScheduled    = driver.StateScheduled
)

var (
	ErrBadCursor   = driver.ErrBadCursor
	ErrBatch       = driver.ErrBatch
	ErrBatchClosed = driver.ErrBatchClosed
	ErrBulkState   = driver.ErrBulkState
	ErrCancelled   = driver.ErrCancelled
	ErrConfig      = driver.ErrConfig
	ErrDuplicate   = driver.ErrDuplicate
	ErrFenced      = driver.ErrFenced
	ErrFinished    = driver.ErrFinished
	ErrInvalid     = driver.ErrInvalid
	ErrLeaseLost   = driver.ErrLeaseLost
	ErrNotFound    = driver.ErrNotFound
	ErrUnsupported = driver.ErrUnsupported
)

// JobStates lists the states in display order.
var JobStates = driver.JobStates

var CapabilitiesOf = driver.CapabilitiesOf
var BatchLimit = driver.BatchLimit
var CheckBulk = driver.CheckBulk
var EncodeCallbacks = driver.EncodeCallbacks
var NewID = driver.NewID
var NewToken = driver.NewToken
var PerMinute = driver.PerMinute
var Validate = driver.Validate
var ValidateBatch = driver.ValidateBatch
var ValidateLeaseName = driver.ValidateLeaseName
var WithFence = driver.WithFence
var FenceFrom = driver.FenceFrom
var WithWorker = driver.WithWorker
var WorkerOf = driver.WorkerOf
var BatchDue = driver.BatchDue
var MemberTransition = driver.MemberTransition
