package queue

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// heartbeat is the part of a run that keeps the worker listed in the
// queue's WorkerRegistry: it reports the worker every interval and
// deregisters it when the run ends.
type heartbeat struct {
	reg   WorkerRegistry
	info  WorkerInfo
	every time.Duration
	ctx   context.Context
	halt  *halt
	log   *slog.Logger
}

// run beats until done is closed, then deregisters.
func (h *heartbeat) run(done <-chan struct{}) {
	fails := streak{log: h.log, doing: "worker heartbeat", level: slog.LevelWarn}
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		switch err := h.reg.Heartbeat(h.ctx, h.info); {
		case err == nil:
			fails.ok()
		case h.ctx.Err() != nil:
		case !h.halt.check("sending its heartbeat", err):
			fails.failed(err)
		}
		select {
		case <-done:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := h.reg.Deregister(ctx, h.info.ID); err != nil {
				h.log.Warn("queue: deregistering worker", "err", err)
			}
			cancel()
			return
		case <-t.C:
		}
	}
}

// hostname for the worker registry.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
