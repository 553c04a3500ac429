// Package stackpark parks a goroutine on a channel without letting the
// garbage collector shrink its stack meanwhile.
//
// # Why
//
// At every collection the runtime halves the stack of a parked goroutine
// that uses less than a quarter of it. A pool goroutine that runs work
// with a deep stack and waits for more with a shallow one therefore loses
// the stack its work grew, and grows it again, by copying every frame, in
// its next unit of work. A Worker's thousand executors each grow to 8-16
// KB decoding a payload and recording its outcome; keeping their stacks
// took 38% off the client's CPU per job in PostgreSQL's burn-down (see
// docs/benchmarks.md, run AZ).
//
// # How
//
// Receive waits below a frame of Depth bytes, so the part of the stack in
// use while it waits stays above a quarter of any stack up to 4*Depth
// (stacks are powers of two: 16 KB): such a stack is kept as the
// goroutine's work left it. A larger one is halved down to that.
//
// # Cost
//
// Each call clears Depth bytes of stack (some 60 ns more than a plain
// receive, BenchmarkReceive), and a goroutine waiting in it holds a stack
// of at least 8 KB, the power of two above Depth. Use it where a goroutine
// waits between units of work it will do again soon, after the first (a
// goroutine that never worked needs no deep stack kept).
package stackpark
