-- 0026_graphs: graphs of jobs (package dag, driver.Graphs). One row per
-- graph; one row per node with where it stands, how many of its
-- dependencies have not yet succeeded (waiting) and its job, encoded, to
-- push when that reaches 0; one row per dependency (edge), by the nodes'
-- positions (seq). A node's outcome and its dependants' moves are one
-- transaction with its job's ack, each move conditional on the node's
-- state, so it happens once (see sqlqueue/graph.go). IDs and names are
-- VARBINARY, compared byte for byte.
CREATE TABLE IF NOT EXISTS {graphs} (
  id VARBINARY(255) NOT NULL,
  seq BIGINT NOT NULL AUTO_INCREMENT,
  name VARCHAR(255) NOT NULL,
  created_at BIGINT NOT NULL,
  cancelled_at BIGINT NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY {graphs_seq_idx} (seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {graph_nodes} (
  graph_id VARBINARY(255) NOT NULL,
  seq INT NOT NULL,
  name VARBINARY(400) NOT NULL,
  job_id VARBINARY(1020) NOT NULL,
  state VARCHAR(16) NOT NULL,
  waiting INT NOT NULL,
  pushed INT NOT NULL,
  allow_failed INT NOT NULL,
  deps LONGTEXT NOT NULL,
  job LONGTEXT NOT NULL,
  PRIMARY KEY (graph_id, seq),
  UNIQUE KEY {graph_nodes_name_idx} (graph_id, name),
  UNIQUE KEY {graph_nodes_job_idx} (graph_id, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {graph_edges} (
  graph_id VARBINARY(255) NOT NULL,
  from_seq INT NOT NULL,
  to_seq INT NOT NULL,
  PRIMARY KEY (graph_id, from_seq, to_seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

UPDATE {meta} SET value = '26' WHERE name = 'schema_version';
