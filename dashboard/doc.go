// Package dashboard is Meridian's Horizon-style operations dashboard: an
// http.Handler with per-queue figures, throughput and runtime charts, job
// lists by state with filters and payload search, job details, failed jobs
// with retry, forget, flush and bulk actions, queue pause and resume, the
// worker registry, and a JSON API beside the pages.
//
// Pages are rendered on the server with html/template; the stylesheet and
// the small refresh script are embedded in the binary (no CDN, no
// framework). Pages refresh their live region every few seconds by
// fetching it from the server and swapping it in place.
//
// # Mounting
//
// Handler's routes are absolute under its mount point and all begin with
// /queues/. Mount it on your own mux with the prefix stripped (the package
// registers nothing on http.DefaultServeMux):
//
//	mux.Handle("/admin/queues/", http.StripPrefix("/admin", dashboard.Handler(insp)))
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
//	GET  /queues/jobs?state=ready     jobs by state (driver mode)
//	GET  /queues/jobs/{id}            job detail
//	GET  /queues/queue/{name}         queue detail
//	POST /queues/queue/{name}/pause   pause (and .../resume) a queue
//	GET  /queues/workers              worker registry
//	GET  /queues/api/stats            JSON: StatsView
//	GET  /queues/api/jobs, /queues/api/jobs/{id}, /queues/api/metrics, /queues/api/workers
//
// # Driver mode and cookbook mode
//
// In driver mode the figures come from the queue's store, so every replica
// of an application shows the same numbers, summed over every worker
// process, and they survive restarts:
//
//	q, _ := queue.Open(ctx, os.Getenv("QUEUE_URL"))
//	h := dashboard.Handler(dashboard.ForQueue(q))
//
// What the driver implements decides what is shown: queue.Inspector gives
// the figures, charts, job lists, search and details; queue.Pauser gives
// pause and resume; queue.WorkerRegistry gives the workers page. Every read
// is one of the Inspector's bounded calls: counts are exact up to the
// driver's cap and shown as "10,000+" beyond it, lists page by keyset
// cursor, payload search is limited by the driver. The figures and chart
// points are shared between concurrent requests for two seconds, so the
// store answers one QueueStats and one Metrics call per interval however
// many dashboards are open; an action clears them.
//
// In cookbook mode the application feeds in-process counters and a failed
// job store, and the dashboard shows what this process saw:
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
// Any other implementation of Inspector is served the same way.
//
// # Access control
//
// The Authorize option decides, for each request, whether the caller may
// read and whether it may act:
//
//	dashboard.Handler(insp, dashboard.Authorize(func(r *http.Request) (read, act bool) {
//		u := currentUser(r)
//		return u.IsStaff(), u.IsAdmin()
//	}))
//
// Without Authorize the handler serves only requests whose RemoteAddr is a
// loopback address and that carry none of the proxy headers Forwarded,
// X-Forwarded-For, X-Forwarded-Host or X-Real-Ip: enough for a developer's
// machine, closed everywhere else. Refused requests get a 403 page that
// explains how to configure access. Callers who may read but not act see no
// action buttons, and their POSTs are refused.
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
// refused. Every response carries a Content-Security-Policy that allows
// only the embedded script and stylesheet, and everything shown, payloads
// and error messages included, is escaped by html/template.
package dashboard
