package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// FleetSource is a Source that can command the worker processes through
// the store (driver.Fleet): the Workers page's terminate, pause and
// continue buttons, for the fleet and for each worker, and their JSON API.
// The dashboard offers them when the Source implements it and its
// Abilities().Fleet is set.
type FleetSource interface {
	// CommandWorkers records cmd for worker id, or for every worker when
	// id is "" (driver.Fleet.CommandWorkers).
	CommandWorkers(ctx context.Context, id string, cmd driver.WorkerCommand) error
	// PausedWorkers reports whether the fleet is paused and lists the
	// workers paused on their own.
	PausedWorkers(ctx context.Context) (fleet bool, ids []string, err error)
}

// CommandWorkers records a fleet command through the driver's Fleet.
func (qi *QueueInspector) CommandWorkers(ctx context.Context, id string, cmd driver.WorkerCommand) error {
	if qi.fleet == nil {
		return fmt.Errorf("dashboard: commanding workers: %w", queue.ErrUnsupported)
	}
	if err := qi.fleet.CommandWorkers(ctx, id, cmd); err != nil {
		return fmt.Errorf("dashboard: commanding workers: %w", err)
	}
	return nil
}

// PausedWorkers reads the fleet's pauses through the driver's Fleet.
func (qi *QueueInspector) PausedWorkers(ctx context.Context) (bool, []string, error) {
	if qi.fleet == nil {
		return false, nil, fmt.Errorf("dashboard: listing paused workers: %w", queue.ErrUnsupported)
	}
	fleet, ids, err := qi.fleet.PausedWorkers(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("dashboard: listing paused workers: %w", err)
	}
	return fleet, ids, nil
}

// fleetOf returns the handler's FleetSource, or nil when it has none.
func (h *handler) fleetOf() FleetSource {
	fs, ok := h.src.(FleetSource)
	if !ok || !h.src.Abilities().Fleet {
		return nil
	}
	return fs
}

// fleetFlash is the flash code of each command's redirect.
var fleetFlash = map[driver.WorkerCommand]string{
	driver.CommandTerminate: "terminated",
	driver.CommandPause:     "wpaused",
	driver.CommandContinue:  "continued",
}

// commandWorkers serves POST workers/{cmd} and workers/{id}/{cmd}.
func (h *handler) commandWorkers(w http.ResponseWriter, r *http.Request) {
	_, cmd, err := h.fleetCommand(r)
	if errors.Is(err, errNoCommand) {
		h.fail(w, r, http.StatusBadRequest, "Unknown worker command: use terminate, pause or continue.", nil)
		return
	}
	if err != nil {
		h.failErr(w, r, "Commanding the workers", err)
		return
	}
	seeOther(w, relBase(r)+"workers?flash="+url.QueryEscape(fleetFlash[cmd]))
}

// apiCommandWorkers serves POST api/workers/{cmd} and
// api/workers/{id}/{cmd}: {"worker": id or "", "command": cmd}.
func (h *handler) apiCommandWorkers(w http.ResponseWriter, r *http.Request) {
	id, cmd, err := h.fleetCommand(r)
	if errors.Is(err, errNoCommand) {
		h.apiStatus(w, http.StatusBadRequest, "unknown worker command: use terminate, pause or continue")
		return
	}
	if err != nil {
		h.apiError(w, r, err)
		return
	}
	writeJSON(w, struct {
		Worker  string `json:"worker"`
		Command string `json:"command"`
	}{id, string(cmd)})
}

// errNoCommand is a path naming no fleet command.
var errNoCommand = errors.New("dashboard: unknown worker command: use terminate, pause or continue")

// fleetCommand records the command the request's path names.
func (h *handler) fleetCommand(r *http.Request) (string, driver.WorkerCommand, error) {
	fs := h.fleetOf()
	if fs == nil {
		return "", "", fmt.Errorf("dashboard: commanding workers: %w", queue.ErrUnsupported)
	}
	cmd := driver.WorkerCommand(r.PathValue("cmd"))
	if !cmd.Valid() {
		return "", "", errNoCommand
	}
	id := r.PathValue("id")
	if err := fs.CommandWorkers(r.Context(), id, cmd); err != nil {
		return "", "", err
	}
	return id, cmd, nil
}

// fleetRoutes adds the fleet's actions and API to m.
func (h *handler) fleetRoutes(m *router) {
	m.HandleFunc("POST /queues/workers/{cmd}", h.commandWorkers)
	m.HandleFunc("POST /queues/workers/{id}/{cmd}", h.commandWorkers)
	m.HandleFunc("POST /queues/api/workers/{cmd}", h.apiCommandWorkers)
	m.HandleFunc("POST /queues/api/workers/{id}/{cmd}", h.apiCommandWorkers)
}
