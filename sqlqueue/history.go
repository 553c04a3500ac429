package sqlqueue

import (
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// maxHistoryError bounds the error an attempt of the history keeps, in
// bytes (a panic's stack can be long; twenty of them are kept per job).
// last_error keeps the whole reason of the latest failure.
const maxHistoryError = 4096

// historyEntry is one attempt in the history column: its number, when it
// started and ended (microseconds), its error and its worker. The names
// are short: the column holds up to queue.MaxHistory of them per job.
//
// An operator's action (Amend) is an entry of its own: when (t,
// microseconds), by whom and what changed.
type historyEntry struct {
	Attempt  int    `json:"a"`
	Started  int64  `json:"s"`
	Finished int64  `json:"f"`
	Error    string `json:"e"`
	Worker   string `json:"w"`
	At       int64  `json:"t"`
	By       string `json:"by"`
	Did      string `json:"do"`
}

// historyError is reason as the history keeps it (the error of the
// attempt the lease-guarded statements qRetryLeased and qDeadLeased append
// to the history column): valid UTF-8 (the
// dialects' JSON functions require it), at most maxHistoryError bytes.
func historyError(reason string) string {
	reason = strings.ToValidUTF8(reason, "\uFFFD")
	if len(reason) <= maxHistoryError {
		return reason
	}
	cut := maxHistoryError
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut]
}

// maxHistoryLit is queue.MaxHistory as an SQL literal.
var maxHistoryLit = strconv.Itoa(queue.MaxHistory)

// attemptCols are the columns GetJob reads beside jobCols (see
// withAttempts).
const attemptCols = ", started_at, worker, history"

// withAttempts fills info's StartedAt, Worker, History and Actions from the
// columns of attemptCols. A history that is not valid JSON is left out:
// the job itself still shows.
func withAttempts(info *queue.JobInfo, started int64, worker string, history sql.NullString) {
	if started > 0 {
		info.StartedAt = fromMicros(started)
		info.Worker = worker
	}
	if !history.Valid || history.String == "" {
		return
	}
	var hs []historyEntry
	if json.Unmarshal([]byte(history.String), &hs) != nil {
		return
	}
	for _, h := range hs {
		if h.At != 0 {
			info.Actions = append(info.Actions, queue.Action{At: fromMicros(h.At), By: h.By, What: h.Did})
			continue
		}
		a := queue.Attempt{Attempt: h.Attempt, Error: h.Error, Worker: h.Worker}
		if h.Started > 0 {
			a.Started = fromMicros(h.Started)
			a.Runtime = max(time.Duration(h.Finished-h.Started)*time.Microsecond, 0)
		}
		info.History = append(info.History, a)
	}
}
