package dashboard

import (
	"context"
	"errors"
	"fmt"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// ResultSource is a Source that reads job results (queue.SetResult): the
// job page shows a job's result when its Source is one and the store
// keeps it. ForQueue's Source is one; it finds results when its driver
// has driver.Results.
type ResultSource interface {
	// JobResult returns job id's result as stored (JSON), or an error
	// matching queue.ErrNotFound when there is none.
	JobResult(ctx context.Context, id string) ([]byte, error)
}

// JobResult returns job id's result (see ResultSource).
func (qi *QueueInspector) JobResult(ctx context.Context, id string) ([]byte, error) {
	rs := driver.CapabilitiesOf(qi.q).Results
	if rs == nil {
		return nil, fmt.Errorf("dashboard: reading job %s's result: %w", id, queue.ErrNotFound)
	}
	b, err := rs.Result(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("dashboard: reading job %s's result: %w", id, err)
	}
	return b, nil
}

// jobResult is job id's result as the job page shows it, "" when there is
// none or the Source reads none.
func (h *handler) jobResult(ctx context.Context, id string) (shown string, isJSON bool) {
	rs, ok := h.src.(ResultSource)
	if !ok {
		return "", false
	}
	b, err := rs.JobResult(ctx, id)
	if err != nil {
		if !errors.Is(err, queue.ErrNotFound) {
			h.cfg.logger.Warn("dashboard: reading a job's result", "job", id, "err", err)
		}
		return "", false
	}
	shown, isJSON, _ = showPayload(b)
	return shown, isJSON
}
