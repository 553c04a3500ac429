package postgres

// PushCopy exposes the COPY path to the external benchmark, which loads
// batches below copyMin with it too to choose copyMin.
var PushCopy = (*Queue).pushCopy

// ErrConflict is the COPY path's signal to fall back to the INSERT.
var ErrConflict = errConflict
