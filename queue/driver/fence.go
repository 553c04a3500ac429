package driver

import "context"

// Fence is one term of a named lease: the lease's name and the epoch it
// had when its holder was elected (Leaser.AcquireLeaseEpoch). A write that
// carries a Fence (WithFence) is refused with ErrFenced by the stores that
// check it once the lease's epoch is no longer Fence.Epoch.
type Fence struct {
	Lease string
	Epoch int64
}

type fenceKey struct{}

// WithFence returns a copy of ctx that carries f. A store checks the Fence
// of a fenced write (Scheduler.ClaimTick) in the write's own
// transaction, with the lease's row locked so that no election passes the
// write by, and refuses the write with ErrFenced when the lease's epoch is
// not f.Epoch.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the Fence ctx carries (see WithFence).
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}
