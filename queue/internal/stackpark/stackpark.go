package stackpark

// Depth is the stack, in bytes, that Receive keeps in use while it
// waits: stacks of up to four times as much are not shrunk.
const Depth = 6 << 10

// Receive receives from ch, as <-ch does, while keeping the caller's stack
// from being shrunk (see the package documentation). ok is false when ch
// is closed and empty.
//
//go:noinline
func Receive[T any](ch <-chan T) (v T, ok bool) {
	var pad [Depth]byte
	hold(&pad)
	v, ok = <-ch
	return v, ok
}

// hold keeps pad on the stack: taking its address for a call that is not
// inlined stops the compiler from dropping it, and hold lets it escape
// nowhere.
//
//go:noinline
func hold(*[Depth]byte) {}
