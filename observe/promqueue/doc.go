// Package promqueue exports Meridian's job and queue metrics to Prometheus
// through github.com/prometheus/client_golang. A program that does not
// import it links no Prometheus code.
//
// # Use
//
//	m, err := promqueue.New(prometheus.DefaultRegisterer, promqueue.WithInspector(q))
//	if err != nil { ... }
//	w := queue.NewWorker(q)
//	m.Instrument(w) // w.Observer(m).Use(m.Middleware())
//	http.Handle("/metrics", promhttp.Handler())
//
// Instrument sets the worker's Observer; to feed other observers too,
// pass queue.Observers(m, other) to Worker.Observer and add m.Middleware
// with Worker.Use yourself.
//
// # Metrics
//
// The worker's metrics count what this process did, labelled by queue and
// job (the job's routing name):
//
//	meridian_jobs_processed_total{queue,job}      attempts that succeeded
//	meridian_jobs_failed_total{queue,job}         attempts that failed (retried or dead-lettered)
//	meridian_jobs_retried_total{queue,job}        failed attempts released for a retry
//	meridian_jobs_dead_lettered_total{queue,job}  jobs moved to the dead letters
//	meridian_jobs_lease_lost_total{queue,job}     attempts whose lease was lost (result discarded)
//	meridian_job_runtime_seconds{queue,job}       histogram of handler run time
//	meridian_job_wait_seconds{queue,job}          histogram of the wait from availability to start
//	meridian_jobs_in_flight{queue}                handlers running now
//
// A failed attempt counts in failed_total and in exactly one of
// retried_total and dead_lettered_total. A job dead-lettered without
// running (undecodable, no handler, attempts used up by crashed workers)
// counts in failed_total and dead_lettered_total but in neither histogram.
// Counters move only once the driver has recorded the outcome. There is no
// cancelled counter: the worker reports no cancellation event yet.
//
// "In flight per worker" is per scrape target: each process exports its
// own. To tell several Workers of one process apart, register each one's
// Metrics on prometheus.WrapRegistererWith(prometheus.Labels{"worker": id}, reg).
//
// With WithInspector, the store's state is exported too, the same from
// every replica when the driver is a shared database:
//
//	meridian_queue_jobs{queue,state}              jobs by state: ready, scheduled, running, dead
//	meridian_queue_oldest_ready_age_seconds{queue} how long the oldest ready job has waited (0 when none)
//	meridian_queue_paused{queue}                  1 when the queue is paused
//	meridian_queue_stats_errors_total             failed reads of the store
//
// These are read at scrape time and cached (WithCacheTTL, 10 s by default),
// so a scrape every 15 s costs one bounded read: one QueueStats call and
// one Counts and one OldestReady call (driver.Inspector).
// Counts capped by the driver (queue.Count.More) are exported as the cap.
//
// docs/monitoring.md lists Grafana panels and alert rules over these.
package promqueue
