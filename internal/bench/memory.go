package bench

import (
	"context"
	"time"

	"github.com/meridianjobs/meridian/queue"

	// The memory:// scheme.
	_ "github.com/meridianjobs/meridian/memqueue"
)

// Memory is the in-memory driver (memqueue) as a Target. It has no
// database, so no baseline: its figures are absolute.
type Memory struct{}

// Name returns "memory".
func (Memory) Name() string { return "memory" }

// NewQueue opens a new, empty memory:// queue; dropping it is a no-op.
func (Memory) NewQueue(ctx context.Context) (queue.Queue, func(context.Context) error, error) {
	q, err := queue.Open(ctx, "memory://")
	if err != nil {
		return nil, nil, err
	}
	return q, func(context.Context) error { return nil }, nil
}

// InProcess marks the memory driver as keeping its jobs in this process.
func (Memory) InProcess() {}

// Baseline reports ok false: there is no database to measure.
func (Memory) Baseline(context.Context, int, time.Duration) (float64, bool, error) {
	return 0, false, nil
}
