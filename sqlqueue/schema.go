package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue/internal/migrate"
)

// SchemaVersion is the version of the first schema, the only one before
// versions were counted per dialect.
//
// Deprecated: the latest version depends on the dialect (MySQL is at 2);
// use LatestSchemaVersion or (*Queue).SchemaVersions.
const SchemaVersion = 1

// LatestSchemaVersion returns the schema version this release's
// migrations lead to in dialect d.
func LatestSchemaVersion(d Dialect) (int, error) {
	dl, err := dialectFor(d)
	if err != nil {
		return 0, err
	}
	return dl.migrations().Latest()
}

// tableNames holds the quoted names of one queue's tables and the replacer
// that puts them into query templates.
type tableNames struct {
	raw                                  string
	jobs, pauses, workers, metrics, meta string
	runMetrics                           string
	periodic, uniques, counts            string
	batches, batchJobs                   string
	fleet                                string
	tags, tagJobs                        string
	results                              string
	graphs, graphNodes, graphEdges       string
	sequences, sequenceJobs              string
	replacer                             *strings.Replacer
}

func names(d dialect, table string) tableNames {
	t := tableNames{
		raw:     table,
		jobs:    d.quote(table),
		pauses:  d.quote(table + "_pauses"),
		workers: d.quote(table + "_workers"),
		metrics: d.quote(table + "_metrics"),
		// runMetrics holds the run metrics by queue, job name and minute
		// or hour (see FlushMetrics); metrics is gone since it came.
		runMetrics: d.quote(table + "_run_metrics"),
		meta:       d.quote(table + "_meta"),
		// periodic records periodic jobs' ticks; uniques holds the unique
		// keys of UniqueFor pushes until their hold ends.
		periodic: d.quote(table + "_periodic"),
		uniques:  d.quote(table + "_uniques"),
		// counts holds the per-queue job counts by state that the
		// database's triggers keep (see Counts).
		counts: d.quote(table + "_counts"),
		// batches and batch_jobs hold batches and their members (see
		// batch.go).
		batches:   d.quote(table + "_batches"),
		batchJobs: d.quote(table + "_batch_jobs"),
		// fleet holds the fleet's commands to workers (see fleet.go).
		fleet: d.quote(table + "_fleet"),
		// tags and tag_jobs hold the monitored tags and their jobs'
		// records (see tags.go).
		tags:    d.quote(table + "_tags"),
		tagJobs: d.quote(table + "_tag_jobs"),
		// results holds job results (see result.go).
		results: d.quote(table + "_results"),
		// graphs, graph_nodes and graph_edges hold graphs of jobs (see
		// graph.go).
		graphs:     d.quote(table + "_graphs"),
		graphNodes: d.quote(table + "_graph_nodes"),
		graphEdges: d.quote(table + "_graph_edges"),
		// sequences and sequence_jobs hold the heads and the waiting
		// members of sequences (see sequence.go).
		sequences:    d.quote(table + "_sequences"),
		sequenceJobs: d.quote(table + "_sequence_jobs"),
	}
	t.replacer = strings.NewReplacer(
		"{jobs}", t.jobs, "{pauses}", t.pauses, "{workers}", t.workers,
		"{metrics}", t.metrics, "{run_metrics}", t.runMetrics, "{meta}", t.meta, "{periodic}", t.periodic, "{uniques}", t.uniques, "{counts}", t.counts, "{batches}", t.batches, "{batch_jobs}", t.batchJobs, "{fleet}", t.fleet,
		"{tags}", t.tags, "{tag_jobs}", t.tagJobs, "{results}", t.results,
		"{graphs}", t.graphs, "{graph_nodes}", t.graphNodes, "{graph_edges}", t.graphEdges,
		"{sequences}", t.sequences, "{sequence_jobs}", t.sequenceJobs,
		// The claim index, for the statements that must read it whatever
		// the planner's statistics say (SQLite's INDEXED BY).
		"{claim_idx}", d.quote(table+"_claim"),
		// The function that passes a batch's leases (PostgreSQL: see
		// pgLeasesFrom).
		"{leases_fn}", d.quote(table+"_leases_fn"),
	)
	return t
}

// Schema returns the SQL of all of dialect d's up migrations, in order,
// for users who manage their schema with their own migration tool.
// WithTable among opts names the tables; other options are ignored. The
// statements are separated by ";\n\n" (run them one at a time where the
// driver does not accept several in one Exec); each migration's last
// statement records its schema version, which the Queue checks at first
// use. Applying the whole text again is harmless: every statement of a
// migration that creates something checks that it is missing, except an
// ALTER TABLE ... ADD COLUMN on SQLite and MySQL (neither has ADD COLUMN IF
// NOT EXISTS), which fails with "duplicate column" when its column exists,
// and MySQL's ALTER TABLE ... ADD KEY ... DROP KEY that swaps the list
// index and ALTER TABLE ... DROP KEY of the (state, finished_at) index
// (MySQL has no IF [NOT] EXISTS for indexes), which fail with error 1061
// or 1091 once done; skip those errors, as Setup's runner does.
func Schema(d Dialect, opts ...Option) (string, error) {
	cfg := config{table: "meridian_jobs"}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return "", err
		}
	}
	dl, err := dialectFor(d)
	if err != nil {
		return "", err
	}
	return dl.migrations().Script(migrationVars(dl, cfg.table), 0)
}

// tableKinds name a queue's tables besides its jobs table: each is named
// after the jobs table with "_" and the kind appended.
var tableKinds = []string{"pauses", "workers", "metrics", "run_metrics", "meta", "periodic", "uniques", "counts", "batches", "batch_jobs", "fleet", "tags", "tag_jobs", "results", "graphs", "graph_nodes", "graph_edges", "sequences", "sequence_jobs"}

// migrationVars are the names the migration files use for one queue's
// tables and indexes, quoted (the table prefix is validated by WithTable).
func migrationVars(d dialect, table string) map[string]string {
	vars := map[string]string{"jobs": d.quote(table)}
	for _, s := range tableKinds {
		vars[s] = d.quote(table + "_" + s)
	}
	// The counting triggers and their functions (see the counts migration),
	// and those of the scheduled buckets (the scheduled migration).
	for _, s := range []string{"count_ins", "count_del", "count_upd", "sched_ins", "sched_del", "sched_upd"} {
		vars[s+"_trg"] = d.quote(table + "_" + s)
		vars[s+"_fn"] = d.quote(table + "_" + s + "_fn")
	}
	// The function the batch lease statements read their leases from
	// (PostgreSQL's lease_fn migration).
	vars["leases_fn"] = d.quote(table + "_leases_fn")
	for _, s := range []string{"claim", "unique", "state", "finished", "seq", "list", "batches_seq", "batches_finished", "tag_jobs_at", "results_exp", "graphs_seq", "graphs_finished", "graph_nodes_name", "graph_nodes_job", "sequences_head", "sequence_jobs_key", "sequence_jobs_job"} {
		vars[s+"_idx"] = d.quote(table + "_" + s)
	}
	return vars
}

// migrator returns the runner of q's migrations.
func (q *Queue) migrator() *migrate.Runner {
	return &migrate.Runner{
		DB:      q.db,
		Dialect: q.d.migrations(),
		Vars:    migrationVars(q.d, q.t.raw),
		Meta:    q.t.raw + "_meta",
		LockKey: "meridian:" + q.t.raw,
	}
}

// Setup brings the queue's tables to this release's schema: it creates
// them when they are missing and applies the migrations after the version
// they record, each in order and (except on MySQL, whose DDL is not
// transactional) in a transaction of its own. It is idempotent and safe to
// run from several processes at once: the runs are serialised by a lock.
// Tables of a version newer than this release knows are refused with an
// error matching queue.ErrConfig.
func (q *Queue) Setup(ctx context.Context) error {
	if _, _, err := q.Migrate(ctx, 0); err != nil {
		return err
	}
	q.unnestLeases.Store(false) // the leases function is there again
	return q.use(ctx)
}

// Migrate applies the up migrations after the version the tables record,
// up to version to (the latest when to <= 0), and returns the versions
// before and after. Setup is Migrate to the latest version followed by a
// schema check. A recorded version above to is left as it is (use
// MigrateDown to go back).
func (q *Queue) Migrate(ctx context.Context, to int) (from, now int, err error) {
	q.resetReady()
	from, now, err = q.migrator().Up(ctx, to)
	if err != nil {
		return from, now, q.wrap(ctx, err, "migrating tables %s", q.t.raw)
	}
	return from, now, nil
}

// MigrateDown applies down migrations until the tables are at version to
// and returns the versions before and after. Version 0 drops the tables
// and every job in them. A down migration can lose what its up migration
// made possible (see each down file); the Queue refuses an older schema
// until Setup or Migrate brings it back.
func (q *Queue) MigrateDown(ctx context.Context, to int) (from, now int, err error) {
	q.resetReady()
	from, now, err = q.migrator().Down(ctx, to)
	if err != nil {
		return from, now, q.wrap(ctx, err, "migrating tables %s down", q.t.raw)
	}
	return from, now, nil
}

// SchemaVersions returns the schema version q's tables record (0 when
// they do not exist) and the latest one this release knows.
func (q *Queue) SchemaVersions(ctx context.Context) (recorded, latest int, err error) {
	latest, err = q.d.migrations().Latest()
	if err != nil {
		return 0, 0, err
	}
	recorded, err = q.migrator().Version(ctx, q.db)
	if err != nil {
		return 0, latest, q.wrap(ctx, err, "reading the schema version of %s", q.t.raw)
	}
	return recorded, latest, nil
}

func (q *Queue) resetReady() {
	q.readyMu.Lock()
	q.ready = false
	q.readyMu.Unlock()
}

// use checks, once per Queue, that the tables exist with this package's
// schema version, and prepares the connection (SQLite's busy timeout,
// then, once the tables are known to be the queue's, WAL). Every method
// calls it first; after the first success it costs a mutex.
func (q *Queue) use(ctx context.Context) error {
	q.readyMu.Lock()
	defer q.readyMu.Unlock()
	if q.ready {
		return nil
	}
	if err := q.d.prepare(ctx, q); err != nil {
		return q.wrap(ctx, err, "preparing the %s connection", q.d.name())
	}
	if err := q.checkVersion(ctx, stmts(q.db)); err != nil {
		return err
	}
	if err := q.d.prepared(ctx, q); err != nil {
		return q.wrap(ctx, err, "preparing the %s connection", q.d.name())
	}
	q.ready = true
	return nil
}

// useTx is use for a caller's transaction: it checks the schema version
// through tx (on SQLite the pool's only connection may be the one tx
// holds) without preparing the connection.
func (q *Queue) useTx(ctx context.Context, tx statements) error {
	q.readyMu.Lock()
	ready := q.ready
	q.readyMu.Unlock()
	if ready {
		return nil
	}
	return q.checkVersion(ctx, tx)
}

// checkVersion refuses missing tables and tables of another version with
// an error that says what to run; each matches queue.ErrConfig, since no
// retry fixes them.
func (q *Queue) checkVersion(ctx context.Context, ex statements) error {
	latest, err := q.d.migrations().Latest()
	if err != nil {
		return err
	}
	var v string
	err = queryRow(ctx, ex, q.stmt(qSchemaVersion), nil, &v)
	if err != nil && ctx.Err() == nil {
		var n int
		if qerr := queryRow(ctx, ex, q.d.migrations().TableExists, []any{q.t.raw + "_meta"}, &n); qerr == nil && n == 0 {
			return fmt.Errorf("sqlqueue: table %s_meta does not exist: run Setup or `meridian migrate`, or apply sqlqueue.Schema(%q) in a migration: %w", q.t.raw, q.d.name(), queue.ErrConfig)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlqueue: table %s_meta records no schema version: run Setup or `meridian migrate`, or apply sqlqueue.Schema(%q) in a migration: %w", q.t.raw, q.d.name(), queue.ErrConfig)
		}
	}
	if err != nil {
		return q.wrap(ctx, err, "checking schema version of %s", q.t.raw)
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return fmt.Errorf("sqlqueue: tables %s record schema version %q, which is not a number: %w", q.t.raw, v, queue.ErrConfig)
	case n > latest:
		return fmt.Errorf("sqlqueue: tables %s have schema version %d, newer than this release of meridian knows (%d): upgrade github.com/meridianjobs/meridian: %w", q.t.raw, n, latest, queue.ErrConfig)
	case n < latest:
		return fmt.Errorf("sqlqueue: tables %s have schema version %d but this release needs %d: run Setup or `meridian migrate`, or apply the later migrations of sqlqueue.Schema(%q): %w", q.t.raw, n, latest, q.d.name(), queue.ErrConfig)
	}
	return nil
}

// dbTx runs fn in a database/sql transaction with opts.
func dbTx(ctx context.Context, db DB, opts *sql.TxOptions, fn func(ex execer) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// DropTables drops the queue's tables and everything in them: for tests
// and teardown. The Queue must not be used afterwards unless Setup runs
// again.
func (q *Queue) DropTables(ctx context.Context) error {
	q.resetReady()
	// The search index, where enabled: on SQLite its FTS5 table would
	// outlive the jobs table.
	if err := q.d.disableSearch(ctx, q.db, q.t); err != nil {
		return q.wrap(ctx, err, "dropping the search index")
	}
	// Every table the migrations make (tableKinds, which the migration
	// files name), so that a table added later is dropped too.
	for _, kind := range append([]string{""}, tableKinds...) {
		table := q.t.jobs
		if kind != "" {
			table = q.d.quote(q.t.raw + "_" + kind)
		}
		if _, err := q.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			return q.wrap(ctx, err, "dropping table %s", table)
		}
	}
	// The counting triggers went with the jobs table; functions they
	// called and the leases function (PostgreSQL) outlive it.
	for _, stmt := range q.d.dropFunctions(migrationVars(q.d, q.t.raw)) {
		if _, err := q.db.ExecContext(ctx, stmt); err != nil {
			return q.wrap(ctx, err, "dropping the tables' functions")
		}
	}
	return nil
}
