package postgres

// PushCopy exposes the COPY path to the external benchmark, which loads
// batches below copyMin with it too to choose copyMin.
var PushCopy = (*Queue).pushCopy

// ErrConflict is the COPY path's signal to fall back to the INSERT.
var ErrConflict = errConflict

// PingChannel is the channel q's listener sends its self-notifications on.
func PingChannel(q *Queue) string { return q.l.ping }
