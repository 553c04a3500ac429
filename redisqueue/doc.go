// Package redisqueue is a Meridian driver over Redis (github.com/redis/go-redis/v9).
//
// A program hands in the client it already has:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	q, err := redisqueue.New(rdb, redisqueue.WithPrefix("app"))
//
// or opens one from a URL, importing this package for its side effect:
// queue.Open(ctx, "redis://127.0.0.1:6379/0?prefix=app") (rediss:// for
// TLS; go-redis' own parameters such as pool_size are passed on, and any
// other parameter is refused). With master_name=NAME the URL names Redis
// Sentinels instead and the client follows the primary through failovers
// (FailoverParam):
// queue.Open(ctx, "redis://127.0.0.1:26379/0?master_name=mymaster&addr=127.0.0.1:26380").
// Without master_name=, addr= parameters name the further nodes of a Redis
// Cluster (see Redis Cluster below).
//
// # What it implements
//
// The core contract (queue.Queue): Push and PushMany (one script, all or
// nothing), Reserve, ReserveUnstarted and ReserveStarting under leases
// with tokens,
// Complete with the start marks and every outcome and its pushes,
// ExtendMany, the dead letters, Len and Purge;
// the Waiter ability, woken by pub/sub; the Scheduler ability: named
// leases with epochs (leader election, queue.Limiter's limits) and
// periodic ticks claimed once, fenced by a lease's epoch; the
// Workflows ability: batches with their callbacks pushed once, a member
// may be a chain (chains need no ability: a step's next job rides in its
// Completion; in a batch it crosses to the batch's slot with the step's
// outcome, is added there as a pending member before the step counts
// done, and is pushed once: scripts_batch.go); the Graphs
// ability: graphs of jobs (package dag), each node's transition and each
// dependant's push once (graph.go, scripts_graph.go); the Inspector
// ability (exact counts from the sizes of the state sets, lists paged by
// keyset on them, filters and a bounded payload search run on the
// server) and the Reporter ability (a worker registry with expiry, run
// metrics written a second's worth at a time); and the Controller
// ability: pause and resume (checked inside the reservation script),
// cancel of waiting and running jobs (a running job's lease goes to a
// cancel log that its Worker polls through CancelledSince), and bulk
// actions on the jobs a filter selects, a chunk per script; and the
// TagMonitor ability (monitored tags' recent and failed jobs, each list
// trimmed to driver.MaxTaggedJobs in the script that adds to it); and the
// Grouper ability (group members kept by group in the queue's slot, each
// set stored and its members deleted in one script; scripts_group.go);
// and the Sequencer ability (a sequence's members listed in the queue's
// slot, only the head enqueued, the next one enqueued by the script that
// ends the head; sequence.go). docs/drivers.md has the details.
//
// # Keys
//
// Every key starts with a hash tag. The prefix (WithPrefix) is letters,
// digits, "_", "." and "-", so the keys of two prefixes never meet. The
// prefix's own keys share {prefix}:
//
//	{prefix}:ids      hash: job ID -> the base of the queue that holds it (active and dead jobs)
//	{prefix}:queues   set: every queue name pushed to
//	{prefix}:wake     pub/sub channel: a queue name, when a job became ready on it
//	                  (or its queue was resumed)
//	{prefix}:paused   set: the paused queues' names
//	{prefix}:cancels  sorted set: leases of jobs cancelled while running, scored by
//	                  when (ms, the cancelling process's clock); members <id>NUL<token>
//	{prefix}:lease:<name>, {prefix}:periodic:<name>, {prefix}:periodics
//	                  named leases (holder, expiry, epoch) and periodic records
//	{prefix}:batches, {prefix}:bseq
//	                  sorted set: the batches, scored by a sequence; its counter
//	{prefix}:graphs, {prefix}:gseq
//	                  sorted set: the graphs, scored by a sequence; its counter
//	{prefix}:workers, {prefix}:seen
//	                  the worker registry: ID -> entry (JSON); ID by last heartbeat (ms)
//	{prefix}:tags, {prefix}:tag:<tag>:r, :rj, :f, :fj
//	                  monitored tags (set), and per tag its recent and failed
//	                  jobs: IDs by when their attempt ended (ms), records (JSON)
//
// A queue's keys share {prefix:queue} (the base; "%", "{" and "}" of the
// name escaped as %25, %7B, %7D), so a script on one queue touches one
// hash slot:
//
//	base:j:<id>  hash: the job (its fields, state, attempts, lease token and expiry)
//	base:ready   sorted set: ready jobs, scored by -priority; members
//	             <available-at ms + 10^15, 16 digits><sequence, 16 digits><id>,
//	             so that jobs of one priority sort by available-at, then insertion
//	base:sched   sorted set: jobs scheduled for later, scored by available-at (ms)
//	base:sord    sorted set: the same jobs in claim order, as base:ready holds its own,
//	             so that inspection lists them in that order
//	base:run     sorted set: leased jobs, scored by lease expiry (ms)
//	base:dead    sorted set: dead letters, scored by when they died (ms)
//	base:uniq    hash: unique key -> the job holding it (active, or a dead
//	             letter whose UniqueStates name dead: its field uh)
//	base:ufor    sorted set: unique keys held by UniqueFor, scored by the end of the hold
//	base:seq     counter: the insertion sequence
//	base:paused  string: present while the queue is paused
//	base:stats   hash: done, retried, dead, cancelled: totals since the queue began
//	base:m:<hour> hash: run metrics of the hour's minutes (see report.go)
//	base:bout    hash: the outbox, sequence -> a batch member's or graph node's
//	             outcome not yet known applied to its batch or graph, a graph to
//	             follow, or a chain's next job for another queue not yet known
//	             stored
//	base:r:<id>  string: a done job's result, expiring (PX) at its retention; a
//	             graph node's kept without expiry until its graph has finished
//	base:once    sorted set: guards of the pushes made through an outbox into
//	             this queue, scored by when, kept for the batch retention
//	base:grp     sorted set: the queue's group members (state grouped), as
//	             base:ready holds ready jobs
//	base:gm:<len(name)>:<name>:<key>
//	             sorted set: a group's member IDs by insertion sequence
//	base:gl:<name>, base:gf:<name>, base:gn:<name>
//	             sorted sets: the groups of a job name by their newest
//	             member's creation (ms), their oldest one's, their size
//	base:sl:<key> list: a sequence's member IDs in push order, its head
//	             first (members keep the key in their hash's field sk)
//	base:sqw     sorted set: the queue's sequence members waiting behind
//	             their head (state sequenced), as base:ready holds ready jobs
//
// A batch's keys share {prefix:%B:id} (its id escaped as a queue name is;
// "%B" is in no queue's escaped name): the record (a hash of its name,
// callbacks, counters, times and the callbacks due), :st (member ID ->
// state and queue), :p, :d, :f, :c (the member IDs by state), :rk and
// :rl (members' results kept, and to release) and :nx (chain steps added
// as members, not yet known pushed). A member's outcome crosses from its
// queue's slot to its batch's in steps, each one script in one slot and
// safe to run again; scripts_batch.go and docs/drivers.md say which and
// what a reader sees in between. A chain step's next job for another
// queue crosses the same way (chain.go). A batch member may be a chain:
// the ack of a step puts its next step in the member's event, and the
// script that applies it adds the step to the batch as a pending member
// before it counts the finished step done (so the batch never looks
// finished between steps), or drops it when the batch was cancelled or
// has finished (the chain ends with its batch); the step is then pushed
// once through its guard, and one that the push did not store (an
// active job holds its ID) is dropped from the members so the batch can
// still finish. A step dead-lettered is a failed member.
//
// A graph's keys share {prefix:%G:id}: the record (name, times, counters
// by node state), per node hashes by name (:st state, :wt dependencies
// left, :jid and :ix the job's ID both ways, :q its queue, :af, :aft,
// :dp, :jb the encoded job, :pu its push generation, :rk its result's
// retention), :ord the names in dispatch order, and the lists :rd (nodes
// to push), :rl (results to release) and :cq (nodes to cancel). A node's
// outcome and its dependants' pushes cross slots as a batch member's
// outcome does (scripts_graph.go).
//
// # Atomicity
//
// Every state change is one Lua script (EVALSHA, the source sent again on
// NOSCRIPT), so a job's hash, its place in the sets, its unique key and
// the ID index change together. Counts by state are the sizes of the
// sets, changed by the same scripts, so there is no counter to drift. A
// reservation first moves due scheduled jobs and jobs whose lease expired
// (at most 1,000 of each per call) back to ready: an expired job keeps
// its available-at and sequence, so its place. Times are the Redis
// server's clock, in milliseconds.
//
// Push, Complete and the dead-letter calls also write {prefix}:ids, which
// keeps job IDs unique across queues and finds a dead letter's queue.
//
// # Redis Cluster
//
// New takes a *redis.ClusterClient, and queue.Open a URL in go-redis'
// ParseClusterURL form (redis://host:7000?addr=host:7001&addr=host:7002).
// There every script touches one slot: the ID index is the queue's own
// (base:ids, so an ID is unique within its queue), the cancel log too
// (base:cancels), a pause is base:paused alone, {prefix}:queues is added
// to outside the scripts, a call over several queues runs a script per
// queue, and a periodic tick is claimed and its job pushed in two steps
// (cluster.go; docs/drivers.md, "Redis Cluster").
package redisqueue
