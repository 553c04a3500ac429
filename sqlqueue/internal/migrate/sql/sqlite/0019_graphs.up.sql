-- 0019_graphs: graphs of jobs (package dag, driver.Graphs). One row per
-- graph; one row per node with where it stands, how many of its
-- dependencies have not yet succeeded (waiting) and its job, encoded, to
-- push when that reaches 0; one row per dependency (edge), by the nodes'
-- positions (seq). A node's outcome and its dependants' moves are one
-- transaction with its job's ack, each move conditional on the node's
-- state, so it happens once (see sqlqueue/graph.go).
CREATE TABLE IF NOT EXISTS {graphs} (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  cancelled_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS {graph_nodes} (
  graph_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  name TEXT NOT NULL,
  job_id TEXT NOT NULL,
  state TEXT NOT NULL,
  waiting INTEGER NOT NULL,
  pushed INTEGER NOT NULL,
  allow_failed INTEGER NOT NULL,
  deps TEXT NOT NULL,
  job TEXT NOT NULL,
  PRIMARY KEY (graph_id, seq)
);

CREATE UNIQUE INDEX IF NOT EXISTS {graph_nodes_name_idx} ON {graph_nodes} (graph_id, name);

CREATE UNIQUE INDEX IF NOT EXISTS {graph_nodes_job_idx} ON {graph_nodes} (graph_id, job_id);

CREATE TABLE IF NOT EXISTS {graph_edges} (
  graph_id TEXT NOT NULL,
  from_seq INTEGER NOT NULL,
  to_seq INTEGER NOT NULL,
  PRIMARY KEY (graph_id, from_seq, to_seq)
);

UPDATE {meta} SET value = '19' WHERE name = 'schema_version';
