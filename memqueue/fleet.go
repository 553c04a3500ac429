package memqueue

import (
	"context"
	"fmt"
	"slices"

	"github.com/meridianjobs/meridian/queue/driver"
)

var _ driver.Fleet = (*Queue)(nil)

// fleetOrders are the fleet's commands (driver.Fleet).
type fleetOrders struct {
	terminations int64
	paused       bool
	byWorker     map[string]driver.WorkerOrders // Terminate and Paused of one worker
}

// CommandWorkers records cmd for worker id, or for every worker when id
// is "" (driver.Fleet).
func (q *Queue) CommandWorkers(ctx context.Context, id string, cmd driver.WorkerCommand) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: commanding workers: %w", err)
	}
	if !cmd.Valid() {
		return fmt.Errorf("memqueue: commanding workers: unknown command %q: %w", cmd, driver.ErrInvalid)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	f := &q.fleet
	if id == "" {
		switch cmd {
		case driver.CommandTerminate:
			f.terminations++
		case driver.CommandPause:
			f.paused = true
		case driver.CommandContinue:
			f.paused = false
			for wid, o := range f.byWorker {
				o.Paused = false
				f.byWorker[wid] = o
			}
		}
		return nil
	}
	if f.byWorker == nil {
		f.byWorker = make(map[string]driver.WorkerOrders)
	}
	o := f.byWorker[id]
	switch cmd {
	case driver.CommandTerminate:
		o.Terminate = true
	case driver.CommandPause:
		o.Paused = true
	case driver.CommandContinue:
		o.Paused = false
	}
	f.byWorker[id] = o
	return nil
}

// WorkerOrders returns the orders in force for worker id (driver.Fleet).
func (q *Queue) WorkerOrders(ctx context.Context, id string) (driver.WorkerOrders, error) {
	if err := ctx.Err(); err != nil {
		return driver.WorkerOrders{}, fmt.Errorf("memqueue: reading the orders of worker %s: %w", id, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	o := q.fleet.byWorker[id]
	o.Terminations = q.fleet.terminations
	o.Paused = o.Paused || q.fleet.paused
	return o, nil
}

// PausedWorkers reports whether the fleet is paused and lists the workers
// paused on their own, sorted (driver.Fleet).
func (q *Queue) PausedWorkers(ctx context.Context) (bool, []string, error) {
	if err := ctx.Err(); err != nil {
		return false, nil, fmt.Errorf("memqueue: listing paused workers: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []string
	for id, o := range q.fleet.byWorker {
		if o.Paused {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return q.fleet.paused, ids[:min(len(ids), 1000)], nil
}
