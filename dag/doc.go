// Package dag runs workflows as graphs of jobs: each node is a typed job
// (built with queue.NewJob) that runs once every node it comes after has
// succeeded, so a node may wait for several (fan-in) and several may wait
// for one (fan-out).
//
//	g := dag.New("signup")
//	g.Add("user", userJob)
//	g.Add("avatar", avatarJob, dag.After("user"))
//	g.Add("mail", mailJob, dag.After("user"))
//	g.Add("report", reportJob, dag.After("avatar", "mail"))
//	id, err := dag.Dispatch(ctx, q, g)
//
// # State in the store
//
// A graph lives in the store (driver.Graphs), not in a process: Dispatch
// stores every node and its dependencies and pushes the roots in one step
// (inside the caller's transaction, given sqlqueue's TxPusher), and the
// Worker that finishes a node records its outcome, moves the dependants
// and pushes those that became ready in the same transaction as the job's
// ack. Each transition therefore happens once, whichever process finishes
// the node and whatever crashes; handlers run at least once, as everywhere
// in Meridian.
//
// # Failures
//
// A node whose job is dead-lettered cancels the nodes that come after it,
// and theirs, unless a dependant was added with AllowFailed: for it the
// failure counts as a success. A node cancelled (queue.CancelJob, a
// handler's queue.Cancel, or Cancel of the whole graph) cancels its
// dependants the same way. Retry runs a graph's failed nodes again and lets
// the nodes their failure cancelled wait for them once more.
//
// # Results
//
// A node's handler may return a result (queue.SetResult); a node after it
// reads it with Result, naming the dependency:
//
//	user, err := dag.Result[User](ctx, q, "user")
//
// # Limits
//
// A graph has 1 to driver.MaxGraphNodes nodes and at most
// driver.MaxGraphEdges dependencies; a node's name is 1 to
// driver.MaxGraphNodeName bytes. After names only nodes added before, so
// a graph has no cycles. Nodes may not carry unique keys, be batch members
// or be chains. The same limits hold on every store.
package dag
