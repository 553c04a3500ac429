// Package pushgroup coalesces a store's concurrent single pushes.
//
// A web service dispatches one job per request, from many goroutines at
// once. On a store where each push is a statement and a commit (or a
// script call) whose cost is mostly the round trip and the call's fixed
// overhead rather than the row, a Group lets at most a few pushes run on
// their own at once, the store's push lanes; a push arriving while every
// lane is busy waits, and when a lane frees, every push then waiting goes
// to the store together, each answered as if it had run alone. At a low
// rate no push waits; at a high one the groups grow with the rate, so the
// store's work per job falls as the load rises.
//
// # Answers
//
// A grouped push gets the answer its job would have got alone: nil, or
// the store's per-job error (a duplicate). If the store refuses the whole
// group, each of its jobs is pushed again alone, under its caller's
// context, so one job the store refuses cannot fail the others; a job
// whose push made its ID (ownID) and that then comes back as a duplicate
// of that very ID was stored by the refused group, and is answered nil.
//
// A push whose context ends while it waits stores nothing and returns the
// context's error. One whose context ends once its group is being
// written returns the context's error too, and its job may be stored. A
// group runs under a context that ends when every caller in it has given
// up, so a frozen connection holds no lane for longer than its callers
// wait.
package pushgroup
