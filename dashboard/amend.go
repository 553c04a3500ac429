package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The job actions that change a job or add one (issue 29 item 3): retry
// with an edited payload, run a scheduled job now, run a cancelled or
// done job again, dispatch a new job of a registered type. Each is one
// driver.Controller.Amend (or a push and a note), recorded in the job's
// history with who acted (IdentityOf) and what changed.

// JobType registers T as a job type of the application, as Handle binds
// it in the workers: a payload edited on the dashboard (or through
// api/jobs/{id}/retry) for a job named NameOf[T] is decoded into a T,
// strictly (no unknown field, one JSON value), before it is stored, and
// the Dispatch page and POST api/jobs offer T, with opts applied to the
// jobs they dispatch (queue.NewJob's rules; a queue given in the request
// overrides). A job whose name no JobType registers can be retried and
// run now, but not edited or dispatched from here. It panics when T's
// name is "" (an unnamed type or an interface).
func JobType[T any](opts ...queue.Option) Option {
	name := queue.NameOf[T]()
	if name == "" {
		panic("dashboard: JobType of a type without a name")
	}
	t := jobType{
		name: name,
		check: func(b []byte) error {
			_, err := decodeStrict[T](b)
			return err
		},
		build: func(b []byte, queueName string) (driver.Job, error) {
			v, err := decodeStrict[T](b)
			if err != nil {
				return driver.Job{}, err
			}
			o := opts
			if queueName != "" {
				o = append(o[:len(o):len(o)], queue.OnQueue(queueName))
			}
			return queue.NewJob(v, o...)
		},
	}
	return func(c *config) {
		if c.types == nil {
			c.types = make(map[string]jobType)
		}
		if _, dup := c.types[name]; !dup {
			c.typeNames = append(c.typeNames, name)
		}
		c.types[name] = t
	}
}

// jobType is what JobType registers: how to check a payload and build a
// job of the type.
type jobType struct {
	name  string
	check func(payload []byte) error
	build func(payload []byte, queueName string) (driver.Job, error)
}

// errPayload marks a payload refused by its type's check, or a job whose
// type is not registered: the request's fault (422), nothing stored.
var errPayload = errors.New("dashboard: payload refused")

// decodeStrict decodes b into a T: one JSON value, no field T lacks.
func decodeStrict[T any](b []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("not a valid %s: %v: %w", queue.NameOf[T](), err, errPayload)
	}
	if dec.More() {
		return v, fmt.Errorf("not a valid %s: more than one JSON value: %w", queue.NameOf[T](), errPayload)
	}
	return v, nil
}

// AmendSource is a Source that changes jobs for the job actions
// (Abilities().Amend): ForQueue's over a driver with a Controller. The
// handler checks payloads and composes the action recorded; the Source
// stores both.
type AmendSource interface {
	Source
	// AmendJob changes the job id as a says and records a.Action in
	// its history (driver.Controller.Amend's rules and errors).
	AmendJob(ctx context.Context, id string, a driver.Amendment) (driver.JobState, error)
	// DispatchJob pushes j as a new job (driver.Pusher's rules).
	DispatchJob(ctx context.Context, j driver.Job) error
}

// AmendJob changes the job id through the driver's Controller.
func (qi *QueueInspector) AmendJob(ctx context.Context, id string, a driver.Amendment) (driver.JobState, error) {
	if qi.ctl == nil {
		return "", fmt.Errorf("dashboard: changing job %s: %w", id, queue.ErrUnsupported)
	}
	defer qi.changed()
	return qi.ctl.Amend(ctx, id, a)
}

// DispatchJob pushes j to the driver.
func (qi *QueueInspector) DispatchJob(ctx context.Context, j driver.Job) error {
	defer qi.changed()
	return qi.q.Push(ctx, j)
}

// amender returns the Source as an AmendSource when it offers the job
// actions.
func (h *handler) amender() (AmendSource, bool) {
	as, ok := h.src.(AmendSource)
	return as, ok && h.src.Abilities().Amend
}

// actor names who makes the request, for a job's history.
func actorName(ctx context.Context) string {
	id, _ := IdentityOf(ctx)
	return id.Name
}

// amendJob applies op to job id for the request: an edited payload
// (op AmendRetry, payload not nil) is checked against the job's
// registered type first, and the action recorded says what changed. It
// returns the job as it was read before the change.
func (h *handler) amendJob(ctx context.Context, id string, op driver.AmendOp, payload []byte) (JobView, error) {
	as, ok := h.amender()
	if !ok {
		return JobView{}, fmt.Errorf("dashboard: changing job %s: %w", id, queue.ErrUnsupported)
	}
	j, err := h.getJob(ctx, id)
	if err != nil {
		return JobView{}, err
	}
	var what string
	switch op {
	case driver.AmendRetry:
		what = "retried (was " + string(j.State) + ")"
		if payload != nil {
			t, ok := h.cfg.types[j.Name]
			if !ok {
				return j, fmt.Errorf("the job type %q is not registered (dashboard.JobType), so its payload cannot be checked: %w", j.Name, errPayload)
			}
			if err := t.check(payload); err != nil {
				return j, err
			}
			what += fmt.Sprintf(" with its payload edited (%d → %d bytes)", len(j.Payload), len(payload))
		}
	case driver.AmendRunNow:
		what = "run now (was due " + j.AvailableAt.UTC().Format(time.RFC3339) + ")"
	default:
		what = string(op)
	}
	_, err = as.AmendJob(ctx, id, driver.Amendment{Op: op, Payload: payload, Action: driver.Action{By: actorName(ctx), What: what}})
	return j, err
}

// dispatchJob builds a job of the registered type name from payload and
// pushes it to queueName ("" for the type's default), with who
// dispatched it in its history: one push stores both (driver.Job.Actions).
func (h *handler) dispatchJob(ctx context.Context, name, queueName string, payload []byte) (driver.Job, error) {
	as, ok := h.amender()
	if !ok {
		return driver.Job{}, fmt.Errorf("dashboard: dispatching a job: %w", queue.ErrUnsupported)
	}
	t, ok := h.cfg.types[name]
	if !ok {
		return driver.Job{}, fmt.Errorf("no job type %q is registered (dashboard.JobType): %w", name, errPayload)
	}
	j, err := t.build(payload, queueName)
	if err != nil {
		return driver.Job{}, err
	}
	j.Actions = []driver.Action{{By: actorName(ctx), What: "dispatched from the dashboard"}}
	return j, as.DispatchJob(ctx, j)
}

// cloneJob pushes a copy of job id under a new ID: its queue, name,
// payload, priority, attempt limit, timeout, tags, metadata and unique
// key, ready now with no attempts, its history saying whose clone of
// which job it is (stored with it in one push); the job cloned notes the
// clone's ID. A batch, chain, graph or group member's membership is not
// copied: the clone is a job of its own. A clone of a unique job whose
// key an active job holds is refused (queue.ErrDuplicate).
func (h *handler) cloneJob(ctx context.Context, id string) (JobView, driver.Job, error) {
	as, ok := h.amender()
	if !ok {
		return JobView{}, driver.Job{}, fmt.Errorf("dashboard: cloning job %s: %w", id, queue.ErrUnsupported)
	}
	j, err := h.getJob(ctx, id)
	if err != nil {
		return JobView{}, driver.Job{}, err
	}
	c := driver.CloneOf(j, actorName(ctx), "cloned from "+id+" on the dashboard")
	if err := as.DispatchJob(ctx, c); err != nil {
		return j, c, err
	}
	_, err = as.AmendJob(ctx, id, driver.Amendment{Op: driver.AmendNote,
		Action: driver.Action{By: actorName(ctx), What: "cloned as " + c.ID}})
	if err != nil && !isNotFound(err) {
		h.cfg.logger.Warn("dashboard: noting a clone on the job cloned", "job", id, "clone", c.ID, "err", err)
	}
	return j, c, nil
}
