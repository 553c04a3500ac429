package queue

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// earlyBeat is the least time between two heartbeats: when the jobs the
// worker holds change, it reports them this long after its last beat at
// the earliest, so its counts are at most about this old while jobs come
// and go, at the cost of at most one small write per earlyBeat.
const earlyBeat = time.Second

// heartbeat is the part of a run that keeps the worker listed in the
// store's Reporter: it reports the worker, with the jobs it holds,
// every interval, and early (at most once per earlyBeat) when the jobs it
// holds changed since its last report, which includes going idle; it
// deregisters the worker when the run ends.
type heartbeat struct {
	reg   driver.Reporter
	info  driver.WorkerInfo
	every time.Duration
	// held returns the jobs held by queue (WorkerInfo.Running and
	// Reserved); nil reports none.
	held func() (running, reserved map[string]int)
	ctx  context.Context
	halt *halt
	log  *slog.Logger
}

// run beats until done is closed, then deregisters.
func (h *heartbeat) run(done <-chan struct{}) {
	fails := streak{log: h.log, doing: "worker heartbeat", level: slog.LevelWarn}
	check := min(h.every, earlyBeat)
	t := time.NewTicker(check)
	defer t.Stop()
	var sentRunning, sentReserved map[string]int
	last := time.Now()
	for first := true; ; first = false {
		var running, reserved map[string]int
		if h.held != nil {
			running, reserved = h.held()
		}
		// A beat is due every interval (less half a check, so that a tick
		// a little early does not put it off by a whole check), and at
		// any check that finds the held jobs changed.
		if now := time.Now(); first || now.Sub(last) >= h.every-check/2 ||
			!maps.Equal(running, sentRunning) || !maps.Equal(reserved, sentReserved) {
			last, sentRunning, sentReserved = now, running, reserved
			info := h.info
			info.Running, info.Reserved = running, reserved
			switch err := h.reg.Heartbeat(h.ctx, info); {
			case err == nil:
				fails.ok()
			case h.ctx.Err() != nil:
			case !h.halt.check("sending its heartbeat", err):
				fails.failed(err)
			}
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
