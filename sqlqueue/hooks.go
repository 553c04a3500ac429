package sqlqueue

import (
	"context"
	"log/slog"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/hook"
)

func init() {
	hook.Of = func(q any) hook.Queue { return hooks{q.(*Queue)} }
}

// hooks is what the registration subpackages use of a Queue beyond its
// exported methods (see hook.Queue).
type hooks struct{ q *Queue }

func (h hooks) CheckSchema(ctx context.Context) error { return h.q.use(ctx) }

func (h hooks) CopyRows(jobs []queue.Job) (string, []string, [][]any) { return h.q.copyRows(jobs) }

func (h hooks) Announce(jobs []queue.Job) { h.q.announce(jobs, nil) }

func (h hooks) Tx(s hook.Statements) hook.TxPusher { return h.q.txStatements(s) }

func (h hooks) Own(closeDB func() error) { h.q.closeDB = closeDB }

func (h hooks) Logger() *slog.Logger { return h.q.log }

func (h hooks) Direct(s hook.Statements) { h.q.direct = s }

func (h hooks) Local(origin string, gap time.Duration, wake func(queues []string, jobs []int)) {
	a := &h.q.announcer
	a.origin, a.gap, a.wake = origin, gap, wake
}
