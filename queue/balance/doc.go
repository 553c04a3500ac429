// Package balance says how a queue.Worker shares its handlers among the
// queues it works (Worker.Balance), and holds the arithmetic of each way:
// the even split, the bounded shifts of the automatic balance and the
// smooth weighted round robin of weighted queues.
//
// # Strategies
//
// Strict (the default) is the Worker's order of queues: each reservation
// takes from the first queue that has ready jobs, then the next. A flooded
// queue early in the list starves the later ones.
//
// Weighted is asynq's weighted queues ({"critical": 6, "default": 3,
// "low": 1}): while every queue has ready jobs, out of every 10 jobs the
// worker reserves 6 come from critical, 3 from default and 1 from low, in
// a smooth interleaving; a queue with nothing ready gives its turn to the
// others, so no handler idles while any queue has work.
//
// Simple and Auto are Laravel Horizon's balanced supervisors: the worker
// holds a budget of Max handlers across its queues and allots each queue a
// part of it, at least Min. A queue never holds more reserved jobs than
// its allotment, and the worker never more than Max, whatever the
// allotments do. Simple splits the budget evenly, once. Auto starts even
// and, every Cooldown, moves handlers towards the queues with the most
// work (by the age of their oldest ready job, WaitTime, or by how many
// jobs are ready, Backlog), each queue's allotment changing by at most
// MaxShift per cooldown. Handlers idle in one queue's allotment are not
// lent to another: a shift is the only way handlers move, as in Horizon.
//
// See docs/semantics.md, "Sharing handlers among queues", for the rules and
// the tests that hold them.
package balance
