package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// halt stops a run at the first driver error that retrying cannot fix (one
// matching ErrConfig) and keeps that error for Run to return.
type halt struct {
	stop context.CancelFunc // stops the fetcher; the run then shuts down

	mu         sync.Mutex
	err        error
	terminated bool // by a fleet command
}

// terminate stops the run for a fleet command (see fleetWatch): Run then
// returns ErrTerminated.
func (h *halt) terminate() {
	h.mu.Lock()
	h.terminated = true
	h.mu.Unlock()
	h.stop()
}

// isTerminated reports whether a fleet command terminated the run.
func (h *halt) isTerminated() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.terminated
}

// check reports whether err is a configuration error. The first one,
// wrapped with doing, becomes the run's error and stops the fetcher.
func (h *halt) check(doing string, err error) bool {
	if !errors.Is(err, ErrConfig) {
		return false
	}
	h.mu.Lock()
	first := h.err == nil
	if first {
		h.err = fmt.Errorf("queue: worker stopped %s: %w", doing, err)
	}
	h.mu.Unlock()
	if first {
		h.stop()
	}
	return true
}

// Err returns the configuration error that stopped the run, or nil.
func (h *halt) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}
