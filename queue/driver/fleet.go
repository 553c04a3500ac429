package driver

import "context"

// Fleet is a store that carries commands to the worker processes that
// share it, on every host: how `meridian workers terminate`, `pause` and
// `continue` (and the dashboard's Workers page) reach them. A Worker over
// a Fleet reads its orders (WorkerOrders) about once a second and obeys
// them: it stops reserving while paused, and on a terminate stops as Stop
// does and makes Run return queue.ErrTerminated.
type Fleet interface {
	// CommandWorkers records cmd for the worker id, or for every worker
	// of the store when id is "" (the fleet).
	//
	// CommandTerminate for the fleet adds one to the fleet's
	// Terminations: every worker that read its orders before the call
	// terminates, and workers that start after it (the new code a process
	// supervisor starts) do not. For one worker it sets that worker's
	// Terminate. CommandPause pauses the fleet or the worker;
	// CommandContinue undoes it (the fleet's continue also continues every
	// worker paused on its own). An unknown command fails with ErrInvalid.
	// A worker ID need not be registered: a command for an ID no worker
	// has is kept until Deregister of that ID or the store's pruning of
	// gone workers.
	CommandWorkers(ctx context.Context, id string, cmd WorkerCommand) error
	// WorkerOrders returns the orders in force for worker id: the fleet's
	// and its own.
	WorkerOrders(ctx context.Context, id string) (WorkerOrders, error)
	// PausedWorkers reports whether the fleet is paused and lists the
	// workers paused on their own, sorted, at most 1000.
	PausedWorkers(ctx context.Context) (fleet bool, ids []string, err error)
}

// WorkerCommand is a command to worker processes (Fleet).
type WorkerCommand string

// The commands of Fleet.CommandWorkers.
const (
	// CommandTerminate makes a worker stop reserving, let its running
	// jobs finish within its ShutdownTimeout, flush, and return
	// queue.ErrTerminated from Run, for its process supervisor to start
	// it again (with new code, after a deploy).
	CommandTerminate WorkerCommand = "terminate"
	// CommandPause makes a worker stop reserving; its running jobs
	// finish.
	CommandPause WorkerCommand = "pause"
	// CommandContinue ends a pause.
	CommandContinue WorkerCommand = "continue"
)

// Valid reports whether c is one of the commands.
func (c WorkerCommand) Valid() bool {
	return c == CommandTerminate || c == CommandPause || c == CommandContinue
}

// WorkerOrders are the orders in force for one worker (Fleet).
type WorkerOrders struct {
	// Terminations counts the fleet's terminate commands ever recorded. A
	// worker keeps the count it read when it started and terminates when
	// it reads a larger one.
	Terminations int64 `json:"terminations"`
	// Terminate is set when this worker alone was told to terminate.
	Terminate bool `json:"terminate"`
	// Paused is set while the fleet or this worker is paused.
	Paused bool `json:"paused"`
}
