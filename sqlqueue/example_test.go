package sqlqueue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

type SendWelcome struct{ UserID int }

func Example() {
	dir, _ := os.MkdirTemp("", "sqlqueue-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")) // import _ "modernc.org/sqlite"
	if err != nil {
		panic(err)
	}
	defer db.Close()
	q, err := sqlqueue.New(db, sqlqueue.WithTable("jobs"))
	if err != nil {
		panic(err)
	}
	if err := q.Setup(ctx); err != nil {
		panic(err)
	}

	_ = queue.Dispatch(ctx, q, SendWelcome{UserID: 42}, queue.Unique("welcome:42"))
	_ = queue.Dispatch(ctx, q, SendWelcome{UserID: 42}, queue.Unique("welcome:42")) // skipped: a duplicate
	n, _ := q.Len(ctx, "")
	fmt.Println("pending:", n)

	jobs, _ := q.Reserve(ctx, nil, 10, time.Minute)
	fmt.Println(jobs[0].Name, string(jobs[0].Payload), "attempt", jobs[0].Attempts)
	_, errs, err := q.Complete(ctx, nil, []driver.Completion{{Lease: jobs[0].Lease(), Outcome: driver.OutcomeDone}})
	fmt.Println("ack:", errors.Join(err, errs[0]))
	// Output:
	// pending: 1
	// SendWelcome {"UserID":42} attempt 1
	// ack: <nil>
}

func ExampleQueue_Tx() {
	dir, _ := os.MkdirTemp("", "sqlqueue-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, _ := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	defer db.Close()
	q, _ := sqlqueue.New(db)
	if err := q.Setup(ctx); err != nil {
		panic(err)
	}

	tx, _ := db.BeginTx(ctx, nil)
	// ... the caller's own writes in tx ...
	_ = queue.Dispatch(ctx, q.Tx(tx), SendWelcome{UserID: 7})
	_ = tx.Rollback() // the job goes with the transaction
	n, _ := q.Len(ctx, "")
	fmt.Println("after rollback:", n)

	tx, _ = db.BeginTx(ctx, nil)
	_ = queue.Dispatch(ctx, q.Tx(tx), SendWelcome{UserID: 7})
	_ = tx.Commit()
	n, _ = q.Len(ctx, "")
	fmt.Println("after commit:", n)
	// Output:
	// after rollback: 0
	// after commit: 1
}

func ExampleSchema() {
	ddl, _ := sqlqueue.Schema(sqlqueue.Postgres, sqlqueue.WithTable("jobs"))
	// Print each statement's first line that is not a comment.
	for _, stmt := range strings.Split(ddl, ";\n\n") {
		for _, line := range strings.Split(stmt, "\n") {
			if !strings.HasPrefix(line, "--") {
				fmt.Println(strings.TrimRight(strings.TrimSuffix(line, " ("), ";,"))
				break
			}
		}
	}
	// Output:
	// CREATE TABLE IF NOT EXISTS "jobs"
	// CREATE INDEX IF NOT EXISTS "jobs_claim" ON "jobs" (queue, priority DESC, run_at, seq) WHERE state = 'pending'
	// CREATE UNIQUE INDEX IF NOT EXISTS "jobs_unique" ON "jobs" (queue, unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL
	// CREATE INDEX IF NOT EXISTS "jobs_state" ON "jobs" (state, queue, seq)
	// CREATE INDEX IF NOT EXISTS "jobs_finished" ON "jobs" (state, finished_at) WHERE state <> 'pending'
	// CREATE TABLE IF NOT EXISTS "jobs_pauses" (queue TEXT PRIMARY KEY, paused_at BIGINT NOT NULL)
	// CREATE TABLE IF NOT EXISTS "jobs_workers"
	// CREATE TABLE IF NOT EXISTS "jobs_metrics"
	// CREATE TABLE IF NOT EXISTS "jobs_meta" (name TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at BIGINT NOT NULL)
	// INSERT INTO "jobs_meta" (name, value, expires_at) VALUES ('maintenance_leader', '', 0) ON CONFLICT DO NOTHING
	// INSERT INTO "jobs_meta" (name, value, expires_at) VALUES ('schema_version', '1', 0)
	// ALTER TABLE "jobs" ADD COLUMN IF NOT EXISTS snoozes INTEGER NOT NULL DEFAULT 0
	// CREATE TABLE IF NOT EXISTS "jobs_periodic"
	// CREATE TABLE IF NOT EXISTS "jobs_uniques"
	// UPDATE "jobs_meta" SET value = '2' WHERE name = 'schema_version'
	// UPDATE "jobs_meta" SET value = '3' WHERE name = 'schema_version'
	// DROP TABLE IF EXISTS "jobs_counts"
	// CREATE TABLE IF NOT EXISTS "jobs_counts"
	// CREATE OR REPLACE FUNCTION "jobs_count_ins_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// CREATE OR REPLACE FUNCTION "jobs_count_del_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// CREATE OR REPLACE FUNCTION "jobs_count_upd_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// DROP TRIGGER IF EXISTS "jobs_count_ins" ON "jobs"
	// CREATE TRIGGER "jobs_count_ins" AFTER INSERT ON "jobs" REFERENCING NEW TABLE AS new_rows
	// DROP TRIGGER IF EXISTS "jobs_count_del" ON "jobs"
	// CREATE TRIGGER "jobs_count_del" AFTER DELETE ON "jobs" REFERENCING OLD TABLE AS old_rows
	// DROP TRIGGER IF EXISTS "jobs_count_upd" ON "jobs"
	// CREATE TRIGGER "jobs_count_upd" AFTER UPDATE ON "jobs" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	// DELETE FROM "jobs_counts"
	// INSERT INTO "jobs_counts" (queue, state, shard, n) SELECT queue, state, 0, COUNT(*) FROM "jobs" GROUP BY queue, state
	// UPDATE "jobs_meta" SET value = '4' WHERE name = 'schema_version'
	// CREATE OR REPLACE FUNCTION "jobs_sched_ins_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// CREATE OR REPLACE FUNCTION "jobs_sched_del_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// CREATE OR REPLACE FUNCTION "jobs_sched_upd_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// DROP TRIGGER IF EXISTS "jobs_sched_ins" ON "jobs"
	// CREATE TRIGGER "jobs_sched_ins" AFTER INSERT ON "jobs" REFERENCING NEW TABLE AS new_rows
	// DROP TRIGGER IF EXISTS "jobs_sched_del" ON "jobs"
	// CREATE TRIGGER "jobs_sched_del" AFTER DELETE ON "jobs" REFERENCING OLD TABLE AS old_rows
	// DROP TRIGGER IF EXISTS "jobs_sched_upd" ON "jobs"
	// CREATE TRIGGER "jobs_sched_upd" AFTER UPDATE ON "jobs" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	// DELETE FROM "jobs_counts" WHERE state LIKE 'at:%'
	// INSERT INTO "jobs_counts" (queue, state, shard, n) SELECT queue, 'at:' || (run_at / 300000000), 0, COUNT(*) FROM "jobs"
	// UPDATE "jobs_meta" SET value = '5' WHERE name = 'schema_version'
	// ALTER TABLE "jobs" ADD COLUMN IF NOT EXISTS started_at BIGINT NOT NULL DEFAULT 0
	// UPDATE "jobs_meta" SET value = '6' WHERE name = 'schema_version'
	// CREATE INDEX IF NOT EXISTS "jobs_list" ON "jobs" (state, queue, finished_at, seq)
	// DROP INDEX IF EXISTS "jobs_state"
	// UPDATE "jobs_meta" SET value = '7' WHERE name = 'schema_version'
	// CREATE TABLE IF NOT EXISTS "jobs_batches"
	// CREATE UNIQUE INDEX IF NOT EXISTS "jobs_batches_seq" ON "jobs_batches" (seq)
	// CREATE INDEX IF NOT EXISTS "jobs_batches_finished" ON "jobs_batches" (finished_at) WHERE finished_at > 0
	// CREATE TABLE IF NOT EXISTS "jobs_batch_jobs"
	// UPDATE "jobs_meta" SET value = '8' WHERE name = 'schema_version'
	// ALTER TABLE "jobs_workers" ADD COLUMN IF NOT EXISTS running TEXT NULL, ADD COLUMN IF NOT EXISTS reserved TEXT NULL
	// UPDATE "jobs_meta" SET value = '9' WHERE name = 'schema_version'
	// CREATE OR REPLACE FUNCTION "jobs_count_ins_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// CREATE OR REPLACE FUNCTION "jobs_count_del_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// CREATE OR REPLACE FUNCTION "jobs_count_upd_fn"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	// DROP TRIGGER IF EXISTS "jobs_sched_upd" ON "jobs"
	// DROP TRIGGER IF EXISTS "jobs_sched_del" ON "jobs"
	// DROP TRIGGER IF EXISTS "jobs_sched_ins" ON "jobs"
	// DROP FUNCTION IF EXISTS "jobs_sched_upd_fn"()
	// DROP FUNCTION IF EXISTS "jobs_sched_del_fn"()
	// DROP FUNCTION IF EXISTS "jobs_sched_ins_fn"()
	// ALTER TABLE "jobs" SET (fillfactor = 36)
	// DROP INDEX IF EXISTS "jobs_list"
	// CREATE INDEX IF NOT EXISTS "jobs_list" ON "jobs" (state, queue, finished_at, seq) WHERE state <> 'pending'
	// UPDATE "jobs_meta" SET value = '10' WHERE name = 'schema_version'
	// ALTER TABLE "jobs_meta" ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0
	// UPDATE "jobs_meta" SET value = '11' WHERE name = 'schema_version'
	// ALTER TABLE "jobs_periodic" ADD COLUMN IF NOT EXISTS paused BOOLEAN NOT NULL DEFAULT FALSE
	// ALTER TABLE "jobs_periodic" ADD COLUMN IF NOT EXISTS template BYTEA NOT NULL DEFAULT ''
	// UPDATE "jobs_meta" SET value = '12' WHERE name = 'schema_version'
	// CREATE TABLE IF NOT EXISTS "jobs_fleet"
	// UPDATE "jobs_meta" SET value = '13' WHERE name = 'schema_version'
	// ALTER TABLE "jobs_workers" ADD COLUMN IF NOT EXISTS max_attempts INTEGER NOT NULL DEFAULT 0
	// UPDATE "jobs_meta" SET value = '14' WHERE name = 'schema_version'
	// CREATE TABLE IF NOT EXISTS "jobs_run_metrics"
	// DROP TABLE IF EXISTS "jobs_metrics"
	// UPDATE "jobs_meta" SET value = '15' WHERE name = 'schema_version'
	// CREATE TABLE IF NOT EXISTS "jobs_tags"
	// CREATE TABLE IF NOT EXISTS "jobs_tag_jobs"
	// CREATE INDEX IF NOT EXISTS "jobs_tag_jobs_at" ON "jobs_tag_jobs" (tag, list, at_us, id)
	// UPDATE "jobs_meta" SET value = '16' WHERE name = 'schema_version'
	// CREATE TABLE IF NOT EXISTS "jobs_results"
	// CREATE INDEX IF NOT EXISTS "jobs_results_exp" ON "jobs_results" (expires_us)
	// UPDATE "jobs_meta" SET value = '17' WHERE name = 'schema_version'
	// CREATE TABLE IF NOT EXISTS "jobs_graphs"
	// CREATE UNIQUE INDEX IF NOT EXISTS "jobs_graphs_seq" ON "jobs_graphs" (seq)
	// CREATE TABLE IF NOT EXISTS "jobs_graph_nodes"
	// CREATE UNIQUE INDEX IF NOT EXISTS "jobs_graph_nodes_name" ON "jobs_graph_nodes" (graph_id, name)
	// CREATE UNIQUE INDEX IF NOT EXISTS "jobs_graph_nodes_job" ON "jobs_graph_nodes" (graph_id, job_id)
	// CREATE TABLE IF NOT EXISTS "jobs_graph_edges"
	// UPDATE "jobs_meta" SET value = '18' WHERE name = 'schema_version'
	// ALTER TABLE "jobs" ADD COLUMN IF NOT EXISTS unique_hold TEXT
	// DROP INDEX IF EXISTS "jobs_unique"
	// CREATE UNIQUE INDEX IF NOT EXISTS "jobs_unique" ON "jobs" (queue, unique_key)
	// UPDATE "jobs_meta" SET value = '19' WHERE name = 'schema_version'
	// ALTER TABLE "jobs_graphs" ADD COLUMN IF NOT EXISTS finished_at BIGINT NOT NULL DEFAULT 0
	// CREATE INDEX IF NOT EXISTS "jobs_graphs_finished" ON "jobs_graphs" (finished_at)
	// ALTER TABLE "jobs_results" ADD COLUMN IF NOT EXISTS keep_us BIGINT NOT NULL DEFAULT 0
	// UPDATE "jobs_meta" SET value = '20' WHERE name = 'schema_version'
	// CREATE TABLE IF NOT EXISTS "jobs_sequences"
	// CREATE UNIQUE INDEX IF NOT EXISTS "jobs_sequences_head" ON "jobs_sequences" (head_id)
	// CREATE TABLE IF NOT EXISTS "jobs_sequence_jobs"
	// CREATE INDEX IF NOT EXISTS "jobs_sequence_jobs_key" ON "jobs_sequence_jobs" (queue, seq_key, pos)
	// CREATE UNIQUE INDEX IF NOT EXISTS "jobs_sequence_jobs_job" ON "jobs_sequence_jobs" (job_id)
	// UPDATE "jobs_meta" SET value = '21' WHERE name = 'schema_version'
	// CREATE OR REPLACE FUNCTION "jobs_leases_fn"(ids TEXT[], toks TEXT[]) RETURNS TABLE (lease_id TEXT, lease_tok TEXT)
	// UPDATE "jobs_meta" SET value = '22' WHERE name = 'schema_version'
	// DROP TRIGGER IF EXISTS "jobs_count_upd" ON "jobs"
	// CREATE TRIGGER "jobs_count_upd" AFTER UPDATE ON "jobs" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	// UPDATE "jobs_meta" SET value = '23' WHERE name = 'schema_version'
}
