package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// periodicTemplate is the encoding of PeriodicInfo.Template: the fields of
// the job a tick enqueues that its builder chose, without those each push
// sets (ID, times, attempts, lease).
type periodicTemplate struct {
	Queue         string            `json:"queue,omitempty"`
	Name          string            `json:"name"`
	Payload       []byte            `json:"payload"`
	Priority      int               `json:"priority,omitempty"`
	MaxAttempts   int               `json:"max_attempts,omitempty"`
	Timeout       time.Duration     `json:"timeout,omitempty"`
	UniqueKey     string            `json:"unique_key,omitempty"`
	UniqueFor     time.Duration     `json:"unique_for,omitempty"`
	UniqueReplace bool              `json:"unique_replace,omitempty"`
	UniqueStates  []JobState        `json:"unique_states,omitempty"`
	Tags          []string          `json:"tags,omitempty"`
	Meta          map[string]string `json:"meta,omitempty"`
}

// EncodePeriodicTemplate returns the Template of a periodic record whose
// ticks enqueue jobs like j (queue.Periodic builds one per tick): the
// fields its builder chose, without ID, times, attempts or lease.
func EncodePeriodicTemplate(j Job) ([]byte, error) {
	b, err := json.Marshal(periodicTemplate{
		Queue: j.Queue, Name: j.Name, Payload: j.Payload, Priority: j.Priority,
		MaxAttempts: j.MaxAttempts, Timeout: j.Timeout,
		UniqueKey: j.UniqueKey, UniqueFor: j.UniqueFor, UniqueReplace: j.UniqueReplace, UniqueStates: j.UniqueStates,
		Tags: j.Tags, Meta: j.Meta,
	})
	if err != nil {
		return nil, fmt.Errorf("queue: encoding the template of periodic job %s: %w", j.Name, err)
	}
	return b, nil
}

// RunPeriodic pushes, now, one job built from the Template of the periodic
// record name, carrying MetaPeriodic (and no MetaPeriodicTick): a run by
// hand, outside the schedule, which it leaves as it was (paused or not,
// its ticks claimed as before). It returns the job pushed; an error
// matching ErrNotFound when no worker ever registered name, one matching
// ErrUnsupported when q has no Scheduler or the record has no template (a
// worker of this release registers one at its start), and ErrDuplicate
// when the template's unique key is held.
func RunPeriodic(ctx context.Context, q Queue, name string) (Job, error) {
	s := CapabilitiesOf(q).Scheduler
	if s == nil {
		return Job{}, fmt.Errorf("queue: running periodic job %s: %w", name, CapabilitiesOf(q).Require("Scheduler"))
	}
	recs, err := s.Periodics(ctx)
	if err != nil {
		return Job{}, fmt.Errorf("queue: running periodic job %s: %w", name, err)
	}
	i := slices.IndexFunc(recs, func(p PeriodicInfo) bool { return p.Name == name })
	if i < 0 {
		return Job{}, fmt.Errorf("queue: running periodic job %s: no worker registered it: %w", name, ErrNotFound)
	}
	if len(recs[i].Template) == 0 {
		return Job{}, fmt.Errorf("queue: running periodic job %s: its record has no job template; a worker of this release registers one when it starts: %w", name, ErrUnsupported)
	}
	var t periodicTemplate
	if err := json.Unmarshal(recs[i].Template, &t); err != nil {
		return Job{}, fmt.Errorf("queue: running periodic job %s: decoding its template: %w", name, err)
	}
	meta := maps.Clone(t.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	delete(meta, MetaPeriodicTick)
	meta[MetaPeriodic] = name
	j := Job{
		ID: NewID(), Queue: t.Queue, Name: t.Name, Payload: t.Payload, Priority: t.Priority,
		MaxAttempts: t.MaxAttempts, Timeout: t.Timeout,
		UniqueKey: t.UniqueKey, UniqueFor: t.UniqueFor, UniqueReplace: t.UniqueReplace, UniqueStates: t.UniqueStates,
		Tags: t.Tags, Meta: meta,
	}
	if err := q.Push(ctx, j); err != nil {
		if errors.Is(err, ErrDuplicate) {
			return Job{}, fmt.Errorf("queue: running periodic job %s: %w", name, err)
		}
		return Job{}, fmt.Errorf("queue: running periodic job %s: pushing its job: %w", name, err)
	}
	return j, nil
}
