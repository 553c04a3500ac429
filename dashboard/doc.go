// Package dashboard is Meridian's Horizon-style operations dashboard: an
// http.Handler with per-queue figures, throughput and runtime charts, job
// lists by state with filters and payload search, job details, failed jobs
// with retry, forget, flush and bulk actions, cancelling waiting and running
// jobs (one or in bulk), queue pause and resume, periodic jobs, the worker
// registry, and a JSON API beside the pages.
//
// Pages are rendered on the server with html/template; the stylesheet and
// the small refresh script are embedded in the binary (no CDN, no
// framework). Pages refresh their live region every few seconds by
// fetching it from the server and updating the changed nodes in place, so
// nothing flickers; a refresh waits while the user has ticked boxes, has
// the focus in a form or has selected text in the region.
//
// # Mounting
//
// Handler's routes are absolute under its mount point and all begin with
// /queues/. Mount it on your own mux with the prefix stripped (the package
// registers nothing on http.DefaultServeMux):
//
//	mux.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(src)))
//
// Every link, form action and redirect the handler produces is relative to
// the page it appears on, so the same handler works under any prefix. The
// routes are:
//
//	GET  /queues/                     overview
//	GET  /queues/failed               failed jobs (filters, keyset pages)
//	POST /queues/failed/{id}/retry    retry one failed job
//	POST /queues/failed/{id}/forget   forget one failed job
//	POST /queues/failed/flush         forget every failed job (of a queue)
//	POST /queues/failed/bulk          retry or forget the selected or matching jobs
//	GET  /queues/jobs?state=ready     jobs by state (a Source that can browse; state=failed lists dead jobs)
//	GET  /queues/jobs?id=ID           the sidebar's Job ID box: a redirect to the job's page
//	GET  /queues/jobs/{id}            job detail
//	GET  /queues/confirm?do=ACTION    how many jobs "retry/forget/cancel all matching" would change, and its button
//	POST /queues/jobs/{id}/cancel     cancel one ready, scheduled or running job
//	POST /queues/jobs/bulk            cancel the selected or matching jobs of a state
//	GET  /queues/periodic             periodic jobs: schedule, last and next tick, last run, why overdue
//	POST /queues/periodic/{name}/pause   pause (and .../resume) a periodic job in the store (a PeriodicSource)
//	POST /queues/periodic/{name}/run  run a periodic job now, from the job its ticks enqueue
//	GET  /queues/tags                 monitored tags, and a form to monitor one (a TagSource)
//	GET  /queues/tags/{tag}           a tag's recent jobs (?list=failed: its failed ones), as recorded
//	POST /queues/tags/monitor         monitor the form's tag; POST /queues/tags/{tag}/unmonitor stops
//	GET  /queues/queue/{name}         queue detail
//	POST /queues/queue/{name}/pause   pause (and .../resume) a queue
//	GET  /queues/workers              worker registry; with a FleetSource, each worker's state and the fleet's buttons
//	POST /queues/workers/{cmd}        terminate, pause or continue every worker (cmd: terminate, pause, continue)
//	POST /queues/workers/{id}/{cmd}   terminate, pause or continue one worker
//	GET  /queues/batches              batches, newest first, with progress bars (a BatchSource)
//	GET  /queues/batches/{id}         a batch: progress, callbacks, members by state
//	POST /queues/batches/{id}/cancel  cancel a batch's members not yet finished
//	POST /queues/batches/{id}/retry   retry a batch's failed members (up to 500 a click)
//	GET  /queues/sequences            sequences held by a dead job (?queue=), with Release (a SequenceSource)
//	POST /queues/sequences/release    release the form's sequence (queue, key): its next member runs
//	GET  /queues/api/stats            JSON: the figures of every queue
//	GET  /queues/api/jobs             JSON: one page of jobs by state
//	GET  /queues/api/jobs/{id}        JSON: one job
//	GET  /queues/metrics              throughput, failures, p50 / p95 runtime per queue and job class (?window=1h|24h|7d)
//	GET  /queues/api/metrics          JSON: the same, with the raw points (?window=1h|24h|7d)
//	GET  /queues/api/workers          JSON: the worker registry
//	POST /queues/api/workers/{cmd}        JSON: command every worker; {"worker": "", "command": cmd}
//	POST /queues/api/workers/{id}/{cmd}   JSON: command one worker; {"worker": id, "command": cmd}
//	GET  /queues/api/periodic         JSON: the periodic jobs
//	POST /queues/api/periodic/{name}/pause  JSON: pause (and .../resume, .../run); the record afterwards
//	GET  /queues/api/tags             JSON: the monitored tags and the bounds
//	GET  /queues/api/tags/{tag}       JSON: a tag's recent (?list=failed: failed) jobs
//	POST /queues/api/tags/{tag}/monitor   JSON: monitor (and .../unmonitor); the tag's jobs afterwards
//	GET  /queues/api/batches          JSON: one page of batches
//	GET  /queues/api/batches/{id}     JSON: a batch and a page of its members (?state=, ?after=)
//	POST /queues/api/batches/{id}/cancel  JSON: cancel a batch; the batch afterwards
//	POST /queues/api/batches/{id}/retry   JSON: retry failed members; {"retried": n, "more": bool}
//	POST /queues/api/jobs             JSON: dispatch a job of a registered type (JobType)
//	GET  /queues/api/job-types        JSON: the registered job types
//	POST /queues/api/jobs/{id}/retry  JSON: retry a failed (or kept cancelled or done) job, optionally with a new payload
//	POST /queues/api/jobs/{id}/run-now JSON: run a scheduled job now
//	POST /queues/api/jobs/{id}/clone  JSON: push a copy of the job under a new ID
//	POST /queues/api/jobs/{id}/forget JSON: forget (delete) a failed job
//	POST /queues/api/jobs/{id}/cancel JSON: cancel a job that has not finished
//	POST /queues/api/jobs/bulk        JSON: retry, forget or cancel listed or matching jobs; dry_run counts
//	POST /queues/api/failed/flush     JSON: delete the failed jobs of a queue or of all
//	POST /queues/api/queues/{name}/pause  JSON: pause (and .../resume) a queue
//	GET  /queues/api/sequences        JSON: the sequences held by a dead job (?queue=)
//	POST /queues/api/sequences/release JSON: release a sequence; {"queue": name, "key": key}
//	GET  /queues/api/openapi.json     the OpenAPI 3 document of the api/ routes
//
// An unknown address gets the dashboard's own 404 page (a JSON 404 under
// api/, whatever the method, before any form-token check); a known one
// asked with the wrong method gets 405 (under api/ a JSON 405 with an
// Allow header); jobs?state= with
// an unknown state gets 400. Pages follow the system's dark preference, and
// a sidebar toggle overrides it (kept in the browser's localStorage).
//
// A payload search (q=) goes on by itself: when the store stops a call at
// its row bound before the page is full, the handler asks again from
// where it stopped, within SearchBudget (5 s by default), so the first
// page holds the first matches however deep they lie; only a search that
// runs out of budget says how many jobs it examined, with a link that
// goes on from there. On PostgreSQL, SQLite and MariaDB the opt-in search index
// (`meridian search enable`; see docs/semantics.md) answers such a search
// in one call with the same matches, so the first page comes at once;
// the search hint of a page that searches says whether the index is on
// (a SearchIndexSource: ForQueue's asks its driver at most once a
// minute) or the search scans.
//
// The jobs and failed pages stream a search as it goes: when the
// response can be flushed (http.Flusher, directly or through Unwrap),
// the page's head, its filters and the table's head go out with the
// rows of the store's first call, then each further call's rows as they
// are read, each flushed, then where the search stopped, the pager and
// the rest of the page; the user sees the first matches while the scan
// goes on. The response carries the headers every page does (the
// Content-Security-Policy, the CSRF cookie) and X-Accel-Buffering: no,
// which asks nginx to pass the parts on rather than hold them; a proxy
// that buffers whole responses shows the page once it is complete, as
// before. The page is the one rendered whole for the same result (a
// page that searches always draws its table, with the tags and error
// columns, since its rows are not known when the table begins). A store
// error on the search's first call is the usual error page with its
// status; one after the page began ends the table with a row that says
// the search stopped (the store's error goes to the log, as on every page), and the pager goes on from
// where it stopped. A client that goes away stops the search: the
// store's call under way is cancelled with the request, and no call
// follows. Pages that do not search, and the live region a refresh
// asks for, are rendered whole. GET api/jobs with Accept:
// application/x-ndjson answers the same way in newline-delimited JSON:
// one job object a line, each window's as it is read, then a line
// {"end": true, "state", "next", "scanned", ...} with where the list
// ended, and "error" when a store error stopped the search after the
// answer began (openapi.json: JobStreamEnd).
// A search that starts with "payload." filters the fields of JSON
// payloads instead: payload.user_id = 42, payload.plan != "free" AND
// payload.vip = true, payload.kind = "refund" AND "ORD-77" (a quoted
// text the payload holds); see driver.ParseSearch. One that does not
// parse answers 400 saying at which position what was expected, on the
// page and in api/jobs?q=.
//
// Lists page by keyset cursor, never by offset. Each page's links carry
// the cursors of the pages before it, so Previous and First work as well
// as Next; the links carry at most the last 50 cursors, and on a page
// deeper than that Previous walks back 50 pages and then offers First.
//
// # Sources
//
// Every page and API endpoint reads and acts through one Source, an
// interface whose methods all take the request's context (bounded by
// RequestTimeout). Its Abilities decide what the pages offer: Browse (job
// lists of every state with filters, search and keyset pages), ByState
// (figures counted by state), Shared (figures from a shared store),
// Charts, Runtime, Pause, Workers and Detail. The pages and templates ask
// those abilities, never which implementation is behind them. The package
// has three Sources; an application may write its own.
//
// # Driver mode and cookbook mode
//
// ForQueue gives the Source of a driver (driver mode): the figures come
// from the queue's store, so every replica
// of an application shows the same numbers, summed over every worker
// process, and they survive restarts:
//
//	q, _ := queue.Open(ctx, os.Getenv("QUEUE_URL"))
//	h := dashboard.Handler(dashboard.ForQueue(q))
//
// What the driver can do (queue.CapabilitiesOf) decides what is shown: its
// Inspector gives the figures, charts, job lists, search, details, the
// workers page and the "failed (past 7 days)" card; its Controller gives
// pause and resume, the cancel buttons (a running job's handler is
// stopped within the workers' cancel poll, half a second by default) and
// the "all matching" actions; its Scheduler gives the periodic page; its
// Workflows the batches pages; its Grouper a "grouped" tab on the job
// list (jobs?state=grouped, api/jobs?state=grouped) listing the members
// that wait to be gathered, each with its group key, which a member's
// page shows too, as a set's page shows the group it came from and its
// size; its Sequencer the Sequences page (below) and a "sequenced" tab
// (jobs?state=sequenced) listing the members that wait behind their
// sequence's head. Every read is one of the
// Inspector's bounded calls: counts are exact where the driver keeps them
// (the SQL drivers and memqueue count every state, scheduled jobs
// included; a running count past 10,000 is shown as "10,000+"), lists
// page by keyset cursor in the order of the index that serves them
// (waiting and running jobs in claim order: priority, then run time, then
// insertion; failed, done and cancelled jobs by the time they finished,
// newest first), payload search is limited by the driver. The figures and chart
// points are shared between concurrent requests for two seconds, so the
// store answers one QueueStats and one Metrics call per interval however
// many dashboards are open; an action clears them. Past those two seconds
// a page shows figures up to 15 seconds old at once while one read in the
// background replaces them, so no page waits for a slow store's figures
// except the first after an action.
//
// Every page says when its figures were read ("Read at 19:42:07 UTC",
// which the page's script shows in the reader's own time zone, UTC kept in
// the tooltip): the overview gives the time of the shared read that
// produced its figures, not that of the request; the queue page and the
// job lists, which read their jobs for the request, give that time and,
// when it is another second, the time of the shared figures their counts
// come from. Figures kept because the store did not answer are marked
// stale there too.
//
// A job page gives the job's attempt limit and where it comes from: the
// job's own MaxAttempts when it carries one; else the MaxAttempts setting
// that the live workers serving its queue report with their heartbeats
// (driver.WorkerInfo.MaxAttempts), one number when they agree and each
// with its count of workers when they differ; else queue.DefaultMaxAttempts,
// saying that no live worker serves the queue. The workers' setting is
// the one they hold now: a job dead-lettered before a redeploy changed it
// ran under the earlier one.
//
// NewInspector gives the Source of in-process counters and a failed-job
// store (cookbook mode): the application feeds them, and the dashboard
// shows what this process saw, with a throughput chart from the counters'
// last hour:
//
//	stats := dashboard.NewStats()
//	failed := dashboard.NewMemoryFailedJobs(func(ctx context.Context, j queue.Job) error {
//		return q.Push(ctx, j)
//	}).WithStats(stats)
//	w := queue.NewWorker(q).OnFailed(func(j queue.Job, err error) {
//		stats.OnFailed(j.QueueName())
//		failed.Record(j, j.QueueName(), err)
//	})
//	h := dashboard.Handler(dashboard.NewInspector(stats, failed))
//
// Both are also the cookbook's Inspector, so a Sampler can read them. Any
// other implementation of Inspector is served through InspectorSource:
//
//	h := dashboard.Handler(dashboard.InspectorSource(myInspector))
//
// # JSON API
//
// The api/ routes answer with JSON whose field names are snake_case and
// stable: they are the API's, not the Go types'. Times are RFC 3339 in UTC
// and left out when unknown; durations are milliseconds (floating point)
// in fields ending in _ms, and the stats window is window_seconds. A count
// that a driver caps is an object {"n": 10000, "more": true} meaning "at
// least 10,000"; "more" is left out when the count is exact, and
// {"n": 151200, "estimate": true} is an estimate, at most n (a ready count
// derived from exact totals past the cap of its scheduled or running
// parts). Errors are
// {"error": "..."} with status 400, 401 (a bearer token refused), 403 (not
// allowed), 404 (unknown job, or a part this Source does not offer), 405,
// 409 (an action the job's state refuses), 415 or 500.
//
// GET api/openapi.json serves an OpenAPI 3 document of every api/ route;
// its paths are relative to api/, so it holds under any mount prefix, and
// a test holds it against the router.
//
// GET api/stats is the overview's snapshot:
//
//	{"at": "2026-11-21T14:40:00Z",
//	 "queues": [{"queue": "emails", "paused": false, "pending": 12,
//	   "ready": {"n": 10}, "scheduled": {"n": 2}, "running": {"n": 4}, "dead": {"n": 1},
//	   "pushed": 0, "retried": 0, "processed": 840, "failed": 9,
//	   "throughput": 0.23, "jobs_per_minute": 14.1, "window_seconds": 3600,
//	   "avg_runtime_ms": 25.3, "max_runtime_ms": 180.2, "avg_wait_ms": 4.4,
//	   "max_wait_ms": 5400, "oldest_ready_at": "2026-11-21T14:39:54.6Z",
//	   "done": {"n": 8100}, "cancelled": {"n": 0}, "unserved": true}],
//	 "totals": {"queue": "all", ...the same fields, summed},
//	 "processes": 4, "failed_past_7_days": {"n": 113}, "stale": true}
//
// max_wait_ms is how long the oldest ready job has waited (Horizon's max
// wait; 0 with none ready, and oldest_ready_at left out); in totals, the
// longest. unserved (left out when false) marks a queue with ready jobs
// that no live worker in the registry serves. done and cancelled are the
// finished jobs the store keeps, where it counts them.
// processes is the number of live worker processes, -1 when the Source
// keeps no registry. failed_past_7_days counts the jobs dead-lettered in
// the last seven days that are still kept (left out when the driver cannot
// tell: it has no Inspector). stale (left out when false) says the store did not
// answer and the figures are the last ones read, at "at".
//
// pending is ready plus scheduled in driver mode, pushed minus processed
// minus failed in cookbook mode. processed and failed count attempts over
// window_seconds in driver mode (failed includes attempts that will be
// retried) and totals since NewStats in cookbook mode; pushed and retried
// are cookbook-mode counters. throughput is jobs per second,
// jobs_per_minute the recent rate per minute. The single-word fields
// decode into StatsView with encoding/json, as the cookbook reads a
// snapshot (Queue, Processed, Failed, Pending, Throughput, Totals).
//
// GET api/jobs?state=dead lists jobs of one state: ready, scheduled,
// running, dead (also accepted as failed; the default) or done. It takes
// the pages' filters queue, name, tag and q (payload search), limit (up to
// 500; the driver's default page otherwise) and after, the cursor of the
// previous answer's next; any other parameter (search= for q=) is a 400
// that names the accepted ones, not a filter silently ignored:
//
//	{"state": "dead", "jobs": [JOB, ...], "next": "f1795593573392417.8123"}
//
// next is an opaque cursor, left out on the last page. In cookbook mode pages are numbered:
// next_page gives the following page= instead. A payload search that
// stopped at its row bound before filling the page adds "scanned": the
// number of jobs it examined; next then continues the search after them. A JOB, also the body of GET
// api/jobs/{id}, is
//
//	{"id": "01a1fe8a...", "queue": "emails", "name": "SendWelcomeEmail",
//	 "state": "dead", "payload": {"user_id": 42}, "priority": 0,
//	 "attempts": 3, "max_attempts": 0, "timeout_ms": 30000,
//	 "unique_key": "...", "tags": ["vip"], "meta": {"trace": "..."},
//	 "last_error": "mail server refused the address",
//	 "created_at": "...", "available_at": "...", "updated_at": "...",
//	 "finished_at": "...", "lease_expires_at": "...",
//	 "started_at": "...", "worker": "...",
//	 "history": [{"attempt": 1, "started_at": "...", "runtime_ms": 812.5,
//	   "error": "smtp: 421", "worker": "..."}]}
//
// payload is the job's payload as JSON when it is valid JSON; otherwise it
// is left out and payload_base64 holds the bytes (standard base64).
// max_attempts 0 means the job carries no limit of its own: the
// MaxAttempts setting of the worker that takes it applies (api/workers
// gives each worker's); timeout_ms,
// unique_key, meta, last_error and the times are left out when unset. The
// lease token is never shown. started_at and worker are the latest
// attempt's start and the worker that reserved it; history lists the
// failed attempts, oldest first (the last 20), in api/jobs/{id} only. They
// are left out where the driver does not record them (every bundled driver
// does).
//
// GET api/metrics?window=1h|24h|7d (default 1h; any other window is a
// 400) gives the Metrics page's data: the store's points of the window,
// one per queue, job name and minute (1h) or hour (24h, 7d, from a
// HourlySource; a source without hourly points answers 404), oldest
// first, and their sums per queue and per job name, each with its steps
// that have runs:
//
//	{"window": "1h", "step_seconds": 60, "since": "...",
//	 "points": [{"queue": "emails", "name": "SendEmail", "minute": "2026-11-21T14:36:00Z",
//	  "processed": 58, "failed": 2, "total_runtime_ms": 1782.2,
//	  "max_runtime_ms": 57.4, "total_wait_ms": 197.9, "runtimes": [0, 0, 3, ...]}],
//	 "queues": [{"name": "emails", "processed": 58, "failed": 2, "p50_runtime_ms": 22.6,
//	  "p95_runtime_ms": 45.3, "max_runtime_ms": 57.4,
//	  "points": [{"at": "2026-11-21T14:36:00Z", "processed": 58, ...}]}],
//	 "jobs": [{"name": "SendEmail", ...}]}
//
// Points carry totals rather than averages, so they add up across queues,
// names and minutes; runtimes are the 24 buckets of
// driver.RuntimeHistogram, from which p50 and p95 are read (within a
// factor of √2).
//
// GET api/workers lists the worker registry (driver mode), sorted by id;
// stale is set for a worker not seen for a minute; with a FleetSource
// (ForQueue's over a driver with the Fleet ability) fleet_paused says
// whether the whole fleet is paused and each worker's paused whether it
// is, by the fleet's pause or its own:
//
//	{"workers": [{"id": "...", "host": "web-1", "pid": 4242, "queues": ["emails"],
//	  "concurrency": 4, "started_at": "...", "last_seen": "...", "stale": false,
//	  "running": {"emails": 2}, "reserved": {}, "paused": false, "max_attempts": 5}],
//	 "fleet_paused": false}
//
// max_attempts is the attempt limit the worker applies to jobs that carry
// none of their own (its MaxAttempts setting); 0 for a worker of an
// earlier release, which does not report it.
//
// POST api/workers/{cmd} and api/workers/{id}/{cmd} (cmd: terminate,
// pause or continue) record a fleet command in the store, which every
// worker reads within about a second (driver.Fleet, docs/semantics.md
// "Fleet commands"); like every POST they need a caller that may act
// (see "Acting through the API").
//
// GET api/periodic lists the periodic jobs (driver mode), sorted by name;
// last_tick is the latest tick enqueued, last_job_id that tick's job, seen
// when a worker last registered it or enqueued a tick, runnable whether
// its record keeps the job a tick enqueues (so run works), overdue why its
// next tick is long past, when it is:
//
//	{"periodic": [{"name": "nightly-report", "schedule": "0 3 * * * (Europe/Paris)",
//	  "last_tick": "...", "next_tick": "...", "last_job_id": "...", "paused": false,
//	  "seen": "...", "runnable": true}]}
//
// POST api/periodic/{name}/pause, /resume and /run answer {"periodic": {...}} as above, after the change,
// and run adds "job_id", the job it pushed; 404 for an unknown name, and
// for run on a record without the job its ticks enqueue.
//
// GET api/tags lists the monitored tags (a TagSource: ForQueue's over a
// driver with driver.TagMonitor) with the bounds, jobs kept per tag and
// list and tags monitored at once:
//
//	{"tags": ["customer:42"], "max_jobs": 1000, "max_tags": 100}
//
// GET api/tags/{tag}?list=recent|failed (default recent) answers the
// tag's records, newest first, as workers recorded them when an attempt
// ended, kept after the store prunes the jobs; POST
// api/tags/{tag}/monitor and /unmonitor answer the same after the change,
// and 400 for a tag that is invalid or past the bound:
//
//	{"tag": "customer:42", "monitored": true, "list": "failed", "read_at": "...",
//	  "jobs": [{"id": "...", "queue": "mail", "name": "SendInvoice", "state": "dead",
//	  "at": "...", "attempts": 3, "error": "smtp: 550"}]}
//
// GET api/batches lists the batches (a BatchSource: ForQueue's over a
// driver with queue.Workflows), newest first, a page of 50 with next as the cursor for
// ?after=; api/batches/{id} adds a page of the batch's members:
//
//	{"batches": [{"id": "...", "name": "import contacts.csv", "allow_failures": true,
//	  "total": 1000, "pending": 12, "done": 987, "failed": 1, "cancelled": 0,
//	  "progress": 98, "created_at": "...", "catch_at": "..."}], "next": "..."}
//
// Its POSTs (cancel, retry) need what every action needs: a caller that
// may act and, for a cookie session, a same-origin request and the
// double-submit token (the X-Csrf-Token header or the csrf_token field,
// equal to the meridian_csrf cookie a page set), or a bearer token.
//
// GET api/sequences?queue= lists the sequences (queue.Sequence) held by
// a dead job (a SequenceSource: ForQueue's over a driver with
// driver.Sequencer), most recently dead first, at most 100; head is the
// dead job as api/jobs/{id} shows it, waiting the members behind it:
//
//	{"queue": "ledger", "limit": 100,
//	 "sequences": [{"queue": "ledger", "key": "account:42", "waiting": 3,
//	   "dead_at": "...", "head": JOB}]}
//
// POST api/sequences/release with {"queue": "ledger", "key":
// "account:42"} (in the body: keys may hold slashes) releases one, as the
// Sequences page's button does: the next member becomes ready, the dead
// job stays a dead letter outside the sequence, and its history records
// the release with who made it. It answers {"queue", "key", "released":
// true, "waiting": n, "head": JOB} (waiting and head left out when the
// sequence was not among the 100 listed), and 404 when no dead job holds
// the sequence (released already, its dead job retried or forgotten, or
// none such).
//
// # Held sequences
//
// A sequence member dead-lettered without driver.ReleaseOnDead holds its
// sequence: the members behind it wait in state sequenced. The Sequences
// page (in the sidebar when the Source is a SequenceSource with
// Abilities().Sequences; each queue's page links its own, and a member's
// page names its sequence) lists them with the dead job, its error, since
// when it is dead and how many wait, and a Release button for callers who
// may act. The overview's row of a queue with held sequences says how
// many (from one read of at most 100). Over a store without sequences the
// page says so, and api/sequences answers 404.
//
// # Acting through the API
//
// Every action the pages offer is a POST under api/ that answers JSON.
// An action on one job answers
//
//	{"action": "retry", "id": "...", "changed": true, "job": {...}}
//
// with job as GET api/jobs/{id} shows it afterwards (when the Source reads
// jobs by id) and, for cancel, "was": the state the job was in. They are
// idempotent where they can be: retrying a job that is already waiting or
// running (retried before), running a job now that is already due and
// cancelling a cancelled job answer 200 with "changed": false and the job
// as it is; retry and run-now also give "was". An action the job's state
// refuses (cancelling a done job, forgetting one that is not failed,
// running a finished job now, retrying a done job over a Source without
// the job actions) is a 409 with the job and "error"; an unknown id is a 404, and
// so is forgetting a job twice (the first forget deleted it).
//
// # Job actions and their history
//
// Over a driver with a Controller (Abilities().Amend) the job page
// offers, as the API does: Run now on a scheduled job; Run again on a
// cancelled or done job the store still keeps (the page says that this
// needs retention on: a pruned job is gone), under its ID with its
// attempts reset; and, for a failed, cancelled or done job whose type
// the application registered with JobType, an edit of its payload before
// the retry. The Dispatch page (and POST api/jobs {"name", "queue",
// "payload"}) pushes a new job of a registered type. An edited or
// dispatched payload is decoded into the type first, strictly (an unknown
// or misspelt field is refused): a payload that does not decode is a 422
// that names the problem, and nothing is stored. A job whose type is not
// registered can be retried and run now, not edited. Every job's page
// offers Clone (and POST api/jobs/{id}/clone, 201 with "clone_of"): a
// copy pushed under a new ID, ready now (driver.CloneOf), whatever the
// job's state; a done or cancelled job only while retention keeps it,
// which the page says.
//
// Each action is recorded in the job's history through
// driver.Controller.Amend: when, who (IdentityOf: the bearer token's
// Identity, or Identify's name for a cookie session) and what changed
// ("retried (was dead) with its payload edited (12 → 14 bytes)"), shown
// in the job page's Actions table and as "actions" in api/jobs/{id}.
// The failed list's Retry button records its retries too. A dispatched
// or cloned job's first action is stored with it, in its push
// (driver.Job.Actions), so it never exists without that note.
//
//	dashboard.Handler(dashboard.ForQueue(q),
//		dashboard.JobType[SendEmail](),
//		dashboard.JobType[Report](queue.OnQueue("reports")),
//		dashboard.Identify(func(r *http.Request) string { return userOf(r) }))
//
// POST api/jobs/bulk takes {"action": "retry"|"forget"|"cancel", "ids":
// [...]} (at most 500 a call) or {"action": ..., "match": {"state": ...,
// "queue": ..., "name": ..., "tag": ..., "q": ...}}: every job the filter
// selects, as the pages' "all matching" buttons do (state dead, the
// default, for retry and forget; ready, scheduled or running for cancel).
// It answers {"action": ..., "changed": n, "more": bool, "limit": n}: more
// says jobs remain, call again. With "dry_run": true and a match it
// changes nothing and counts, as the confirmation page does: "matching":
// {"n": 2590} (exact up to 10,000, then "more"), absent when the Source
// cannot count. Jobs that moved on or went away meanwhile are skipped.
//
// POST api/failed/flush, with an optional body {"queue": name}, deletes
// the failed jobs of the queue, or of every queue, and answers {"queue":
// name, "flushed": n} (null when the Source cannot count). POST
// api/queues/{name}/pause and /resume answer {"queue": name, "paused":
// bool}, the same however often they are repeated. Bodies are JSON
// (Content-Type application/json, or none); an unknown field is a 400.
//
// # Access control
//
// The Authorize option decides, for each request, whether the caller may
// read and whether it may act:
//
//	dashboard.Handler(src, dashboard.Authorize(func(r *http.Request) (read, act bool) {
//		u := currentUser(r)
//		return u.IsStaff(), u.IsAdmin()
//	}))
//
// Without Authorize the dashboard answers only local requests (IsLocal):
// a RemoteAddr on a loopback address and none of the headers a proxy or
// CDN adds (Forwarded, X-Forwarded-For, X-Forwarded-Host,
// X-Forwarded-Proto, X-Real-IP, X-Client-IP, True-Client-IP,
// CF-Connecting-IP; present but empty counts). Such requests may read and
// act, as the cookbook's wiring expects on a developer's machine; anything
// else is refused with a 403 page that says how to configure access, or a
// JSON 403 under api/. Callers who may read but not act see no action
// buttons, and their POSTs are refused.
//
// The default cannot tell a same-host forwarder from a local user: socat,
// an SSH tunnel or an nginx proxy_pass that adds no header forwards
// requests from anywhere with a loopback RemoteAddr and no proxy header.
// If the dashboard can be reached through such a forwarder, configure
// Authorize (dashboard.IsLocal is there to build on), or make the
// forwarder add X-Forwarded-For (nginx: proxy_set_header X-Forwarded-For
// $proxy_add_x_forwarded_for), which the default then refuses.
//
// Scripts authenticate with "Authorization: Bearer TOKEN", checked by the
// BearerTokens hook the application supplies; it returns the Identity
// that holds the token and whether it may act:
//
//	dashboard.Handler(src, dashboard.Authorize(access),
//		dashboard.BearerTokens(func(ctx context.Context, token string) (dashboard.Identity, bool) {
//			t, ok := apiTokens.Lookup(ctx, token)
//			return dashboard.Identity{Name: t.Owner, Act: t.CanAct}, ok
//		}),
//		dashboard.Identify(func(r *http.Request) string { return currentUser(r).Email }))
//
// A request with a bearer token is decided by the hook alone (Authorize
// and the local-only default do not apply to it) and skips the
// cross-origin and double-submit checks below, which protect cookie
// sessions; without BearerTokens, or with a token the hook refuses, it
// gets 401 with a JSON error and a WWW-Authenticate header.
//
// Identify names the user of a request without a token. Every action
// (every POST) is logged through the Logger option's slog.Logger as
// "dashboard: action" with method, path, status, by (the Identity's
// Name: the token's holder, Identify's answer, "local" under the
// local-only default) and bearer, plus what the action did (job, changed,
// queue, flushed, bulk). The Identity is in the context every Source
// method receives (IdentityOf), for a Source that records who acted.
//
// # CSRF
//
// Actions are POST only (other methods get 405) and answer with a 303
// redirect back to the page (POST-redirect-GET). A POST must pass two
// checks, and a failure is a 403, never a redirect: Go's
// http.CrossOriginProtection (Sec-Fetch-Site, or Origin against Host; add
// origins with TrustedOrigin), and a double-submit token: the pages set a
// random token in an HttpOnly, SameSite=Strict cookie whose Path is the
// dashboard's mount point and echo it in every form; a POST whose
// csrf_token field (or X-CSRF-Token header) does not match the cookie is
// refused. Under api/ the refusals are JSON 403s; a request with a bearer
// token needs neither check. Every response carries a Content-Security-Policy that allows
// only the embedded script and stylesheet, and everything shown, payloads
// and error messages included, is escaped by html/template.
package dashboard
