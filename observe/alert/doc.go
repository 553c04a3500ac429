// Package alert watches queues for long waits and high failure rates and
// calls a hook once per transition (crossed, cleared) for the whole
// cluster, in the spirit of Horizon's "long wait" notifications.
//
// # Thresholds
//
// A Threshold names a queue ("" for every queue) and limits on the oldest
// ready job's wait (MaxWait) and on the failure rate of the attempts in
// the driver's stats window (MaxFailureRate, counted once MinRuns attempts
// were made). Each Alerter.Check reads the store once, through the
// driver's inspection interface (driver.Inspector), and compares.
//
// # Once per transition, on one process
//
// Every process that runs an Alerter evaluates, so Firing is right on
// every replica (a dashboard can show it). Who calls the hook is decided
// per transition by a Claimer: a shared record of each alert's state that
// lets exactly one process flip it. The default, NewMemoryClaimer, is
// local to the process: with several processes each would call the hook.
// For a cluster use NewSQLClaimer on the PostgreSQL database the queue
// uses (one INSERT ... ON CONFLICT per transition decides the winner), or
// WithLeader with a leader check, or both. With WithLeader alone (memory
// claims), a new leader calls the hook again for an alert that was already
// firing when it took over.
//
// A queue.Leader over the queue serves as the leader check on every
// driver: WithElection(l). It also fences the claims: each Check claims
// under the Leader's queue.Fence, and a SQLClaimer made with FencedBy (the
// sqlqueue table's "<table>_meta") refuses, in the claim's own statement,
// a claim from a leader that paused and resumed after another was elected
// (queue.ErrFenced). Memory claims are local to the process and not
// fenced.
//
// A hook that fails is logged and not retried: the transition was claimed,
// so no other process calls its hook for it.
//
// # Hooks
//
// Webhook posts a JSON body with a "text" field (Slack-compatible incoming
// webhooks show it) and the alert's fields.
package alert
