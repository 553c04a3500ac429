package sqlqueue

// pgGraphs are PostgreSQL statements of graphs and their nodes (see
// graph.go): see query.
var pgGraphs = queryTemplates{
	qGraphInsert:        "INSERT INTO {graphs} (id, name, created_at, cancelled_at) VALUES (?, ?, ?, 0)",
	qGraphNodesInsert:   "INSERT INTO {graph_nodes} (graph_id, seq, name, job_id, state, waiting, pushed, allow_failed, deps, job) VALUES {list (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)}",
	qGraphEdgesInsert:   "INSERT INTO {graph_edges} (graph_id, from_seq, to_seq) VALUES {list (?, ?, ?)}",
	qGraphByID:          "SELECT id, name, created_at, cancelled_at FROM {graphs} WHERE id = ?",
	qGraphs:             "SELECT id, name, created_at, cancelled_at FROM {graphs} ORDER BY seq DESC LIMIT ?",
	qGraphsAfter:        "SELECT id, name, created_at, cancelled_at FROM {graphs} WHERE seq < (SELECT seq FROM {graphs} WHERE id = ?) ORDER BY seq DESC LIMIT ?",
	qGraphCounts:        "SELECT state, COUNT(*) FROM {graph_nodes} WHERE graph_id = ? GROUP BY state",
	qGraphNodes:         "SELECT seq, name, job_id, state, waiting, pushed, allow_failed, deps FROM {graph_nodes} WHERE graph_id = ? ORDER BY seq",
	qGraphNodeByName:    "SELECT seq, name, job_id, state, waiting, pushed, allow_failed, deps FROM {graph_nodes} WHERE graph_id = ? AND name = ?",
	qGraphEdges:         "SELECT from_seq, to_seq FROM {graph_edges} WHERE graph_id = ?",
	qGraphCancelMark:    "UPDATE {graphs} SET cancelled_at = ? WHERE id = ?",
	qGraphCancelWaiting: "UPDATE {graph_nodes} SET state = 'cancelled' WHERE graph_id = ? AND state = 'waiting'",
	qGraphPendingJobs:   "SELECT job_id FROM {graph_nodes} WHERE graph_id = ? AND state = 'pending' ORDER BY seq",
	qNodeMove:           "UPDATE {graph_nodes} SET state = ? WHERE graph_id = ? AND job_id = ? AND state = ?",
	qNodeSeq:            "SELECT seq FROM {graph_nodes} WHERE graph_id = ? AND job_id = ?",
	qNodeDependants: "SELECT n.seq, n.allow_failed FROM {graph_edges} e JOIN {graph_nodes} n ON n.graph_id = e.graph_id AND n.seq = e.to_seq" +
		" WHERE e.graph_id = ? AND e.from_seq = ? AND n.state = 'waiting' ORDER BY n.seq",
	qNodeSatisfy:       "UPDATE {graph_nodes} SET waiting = waiting - 1 WHERE graph_id = ? AND seq = ? AND state = 'waiting'",
	qNodeReadyJob:      "SELECT waiting, job FROM {graph_nodes} WHERE graph_id = ? AND seq = ?",
	qNodeSet:           "UPDATE {graph_nodes} SET state = ?, waiting = ?, pushed = ? WHERE graph_id = ? AND seq = ?",
	qNodeCancelWaiting: "UPDATE {graph_nodes} SET state = 'cancelled' WHERE graph_id = ? AND seq = ? AND state = 'waiting'",
	qNodeJob:           "SELECT job FROM {graph_nodes} WHERE graph_id = ? AND seq = ?",
	qGraphsEnded: "SELECT g.id FROM {graphs} g WHERE g.finished_at = 0 AND NOT EXISTS" +
		" (SELECT 1 FROM {graph_nodes} n WHERE n.graph_id = g.id AND n.state IN ('waiting', 'pending')) ORDER BY g.seq LIMIT 100",
	qGraphEnd:            "UPDATE {graphs} SET finished_at = ? WHERE id = ? AND finished_at = 0",
	qGraphOpenNode:       "SELECT 1 FROM {graph_nodes} WHERE graph_id = ? AND state IN ('waiting', 'pending') LIMIT 1",
	qGraphReopen:         "UPDATE {graphs} SET finished_at = 0 WHERE id = ?",
	qFinishedGraphs:      "SELECT id FROM {graphs} WHERE finished_at > 0 AND finished_at < ? ORDER BY finished_at LIMIT 100",
	qDeleteGraphEdges:    "DELETE FROM {graph_edges} WHERE graph_id IN (?)",
	qDeleteGraphNodes:    "DELETE FROM {graph_nodes} WHERE graph_id IN (?)",
	qDeleteGraphs:        "DELETE FROM {graphs} WHERE id IN (?)",
	qResultsReleaseGraph: "UPDATE {results} SET expires_us = ? + keep_us WHERE expires_us = ? AND id IN (SELECT job_id FROM {graph_nodes} WHERE graph_id = ?)",
	qResultsReleaseBatch: "UPDATE {results} SET expires_us = ? + keep_us WHERE expires_us = ? AND id IN (SELECT job_id FROM {batch_jobs} WHERE batch_id = ?)",
	qResultsRepinGraph:   "UPDATE {results} SET expires_us = ? WHERE keep_us > 0 AND id IN (SELECT job_id FROM {graph_nodes} WHERE graph_id = ? AND state = 'done')",
}
