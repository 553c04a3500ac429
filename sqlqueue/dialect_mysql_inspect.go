package sqlqueue

func (mysqlDialect) queries() []queryTemplates {
	return []queryTemplates{mysqlReads, mysqlBatches, mysqlGraphs, mysqlSequences, mysqlWrites}
}

// mysqlReads are MySQL's statements of the inspection reads and of the
// small tables (pauses, workers, metrics, unique holds, batches): see query.
// qPriorities is missing: priorities steps the scan itself.
var mysqlReads = queryTemplates{
	qSchemaVersion:        "SELECT value FROM {meta} WHERE name = 'schema_version'",
	qCounts:               "SELECT queue, state, SUM(n) FROM {counts} GROUP BY queue, state HAVING SUM(n) <> 0 ORDER BY queue, state",
	qKnownQueues:          "SELECT queue FROM {counts} WHERE state = ? GROUP BY queue HAVING SUM(n) > 0 ORDER BY queue LIMIT " + maxStatsQueuesLit,
	qFinishedQueues:       "SELECT queue, SUM(n) FROM {counts} WHERE state = ? GROUP BY queue HAVING SUM(n) > 0 ORDER BY queue",
	qScheduledCounts:      "SELECT queue, state, SUM(n) FROM {counts} WHERE state LIKE '" + schedPrefix + "%' GROUP BY queue, state HAVING SUM(n) <> 0",
	qPruneScheduledCounts: "DELETE FROM {counts} WHERE state LIKE '" + schedPrefix + "%' AND ((shard = 0 AND n = 0) OR CASE WHEN state LIKE '" + schedPrefix + "%' THEN CAST(SUBSTRING(state, 4) AS SIGNED) END < ?)",
	qPaused:               "SELECT queue FROM {pauses}",
	qPausedSorted:         "SELECT queue FROM {pauses} ORDER BY queue",
	qResume:               "DELETE FROM {pauses} WHERE queue = ?",
	qStatsMetrics: `SELECT queue, SUM(processed), SUM(failed), SUM(runtime_total_us), MAX(runtime_max_us), SUM(wait_total_us),
  SUM(CASE WHEN at_s >= ? THEN processed ELSE 0 END)
FROM {run_metrics} WHERE span_s = 60 AND at_s >= ? GROUP BY queue`,
	qMetrics: `SELECT
  queue, name, at_s, processed, failed, runtime_total_us, runtime_max_us, wait_total_us, rt0, rt1,
  rt2, rt3, rt4, rt5, rt6, rt7, rt8, rt9, rt10, rt11, rt12, rt13, rt14, rt15, rt16, rt17, rt18,
  rt19, rt20, rt21, rt22, rt23
FROM {run_metrics} WHERE span_s = ? AND at_s >= ? ORDER BY at_s, queue, name LIMIT 100000`,
	qPruneMetrics: "DELETE FROM {run_metrics} WHERE span_s = ? AND at_s < ?",
	qWorkerDelete: "DELETE FROM {workers} WHERE id = ?",
	qWorkers: `SELECT id, host, pid, queues, concurrency, started_at, last_seen, running, reserved, max_attempts FROM {workers}
WHERE last_seen >= ? ORDER BY id LIMIT 1000`,
	qWorkersHeld:        "SELECT running, reserved FROM {workers} WHERE last_seen >= ? AND (running IS NOT NULL OR reserved IS NOT NULL) LIMIT " + maxHeldWorkersLit,
	qPruneWorkers:       "DELETE FROM {workers} WHERE last_seen < ?",
	qFleetTerminateAll:  "INSERT INTO {fleet} (target, paused, terminations, updated_at) VALUES ('*', 0, 1, ?) ON DUPLICATE KEY UPDATE terminations = terminations + 1, updated_at = VALUES(updated_at)",
	qFleetTerminate:     "INSERT INTO {fleet} (target, paused, terminations, updated_at) VALUES (?, 0, 1, ?) ON DUPLICATE KEY UPDATE terminations = 1, updated_at = VALUES(updated_at)",
	qFleetPause:         "INSERT INTO {fleet} (target, paused, terminations, updated_at) VALUES (?, 1, 0, ?) ON DUPLICATE KEY UPDATE paused = 1, updated_at = VALUES(updated_at)",
	qFleetContinue:      "UPDATE {fleet} SET paused = 0, updated_at = ? WHERE target = ?",
	qFleetContinueAll:   "UPDATE {fleet} SET paused = 0, updated_at = ?",
	qFleetOrders:        "SELECT target, paused, terminations FROM {fleet} WHERE target IN ('*', ?)",
	qFleetPaused:        "SELECT target FROM {fleet} WHERE paused = 1 AND target <> '*' ORDER BY target LIMIT 1000",
	qFleetDelete:        "DELETE FROM {fleet} WHERE target = ?",
	qPruneFleet:         "DELETE FROM {fleet} WHERE target <> '*' AND updated_at < ? AND target NOT IN (SELECT id FROM {workers})",
	qGetJob:             "SELECT " + jobCols + attemptCols + " FROM {jobs} WHERE id = ?",
	qJobsByID:           "SELECT " + jobCols + " FROM {jobs} WHERE id IN (?)",
	qUniquesHeld:        "SELECT queue, unique_key FROM {uniques} WHERE unique_key IN (?) AND expires_at > ?",
	qUniqueDeleteEnded:  "DELETE FROM {uniques} WHERE queue = ? AND unique_key = ? AND expires_at <= ?",
	qUniqueRelease:      "DELETE FROM {uniques} WHERE queue = ? AND unique_key = ? AND expires_at = ?",
	qPruneUniques:       "DELETE FROM {uniques} WHERE expires_at < ?",
	qFinishedBatches:    "SELECT id FROM {batches} WHERE finished_at > 0 AND finished_at < ? ORDER BY finished_at LIMIT 100",
	qDeleteBatchMembers: "DELETE FROM {batch_jobs} WHERE batch_id IN (?)",
	qDeleteBatches:      "DELETE FROM {batches} WHERE id IN (?)",
	qDeadLetters:        "SELECT " + jobCols + " FROM {jobs} WHERE state = 'dead' ORDER BY finished_at DESC, seq DESC LIMIT ?",
	qDeadLettersOf:      "SELECT " + jobCols + " FROM {jobs} WHERE state = 'dead' AND queue = ? ORDER BY finished_at DESC, seq DESC LIMIT ?",
	qLen:                "SELECT COUNT(*) FROM {jobs} WHERE state IN ('pending', 'grouped', 'sequenced')",
	qLenOf:              "SELECT COUNT(*) FROM {jobs} WHERE state IN ('pending', 'grouped', 'sequenced') AND queue = ?",
	qPendingMembers:     "SELECT j.id FROM {batch_jobs} m JOIN {jobs} j ON j.id = m.job_id WHERE m.state = 'pending' AND j.state = 'pending' AND j.lease_token IS NULL",
	qPendingMembersOf:   "SELECT j.id FROM {batch_jobs} m JOIN {jobs} j ON j.id = m.job_id WHERE m.state = 'pending' AND j.state = 'pending' AND j.lease_token IS NULL AND j.queue = ?",
	qPendingNodes: "SELECT j.id FROM {graphs} g JOIN {graph_nodes} n ON n.graph_id = g.id JOIN {jobs} j ON j.id = n.job_id" +
		" WHERE g.finished_at = 0 AND n.state = 'pending' AND j.state = 'pending' AND j.lease_token IS NULL",
	qPendingNodesOf: "SELECT j.id FROM {graphs} g JOIN {graph_nodes} n ON n.graph_id = g.id JOIN {jobs} j ON j.id = n.job_id" +
		" WHERE g.finished_at = 0 AND n.state = 'pending' AND j.state = 'pending' AND j.lease_token IS NULL AND j.queue = ?",
	qHasReady: "SELECT 1 FROM {jobs} j WHERE state = 'pending' AND queue IN ({list ?}) AND priority = ? AND j.run_at <= ? AND j.lease_expires_at <= ?" +
		" AND NOT EXISTS (SELECT 1 FROM {pauses} p WHERE p.queue = j.queue) LIMIT 1",
	qHasReadyBelow: "SELECT 1 FROM {jobs} j WHERE state = 'pending' AND queue IN ({list ?}) AND priority <= ? AND j.run_at <= ? AND j.lease_expires_at <= ?" +
		" AND NOT EXISTS (SELECT 1 FROM {pauses} p WHERE p.queue = j.queue) LIMIT 1",
	qFoldShards:       "SELECT queue, state, shard, n FROM {counts} WHERE shard <> 0 FOR UPDATE SKIP LOCKED",
	qFoldAdd:          "INSERT INTO {counts} (queue, state, shard, n) VALUES (?, ?, 0, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n)",
	qLeaseAcquire:     "UPDATE {meta} SET epoch = CASE WHEN value = ? AND expires_at >= ? THEN epoch ELSE epoch + 1 END, value = ?, expires_at = CASE WHEN expires_at = ? THEN expires_at + 1 ELSE ? END WHERE name = ? AND (value = ? OR expires_at < ?)",
	qLeaseRelease:     "UPDATE {meta} SET value = '', expires_at = 0 WHERE name = ? AND value = ?",
	qPeriodicUpdate:   "UPDATE {periodic} SET schedule = ?, next_tick = ?, updated_at = ?, template = ? WHERE name = ?",
	qPeriodicLastTick: "SELECT last_tick FROM {periodic} WHERE name = ?",
	qPeriodicTick:     "UPDATE {periodic} SET last_tick = ?, next_tick = ?, schedule = ?, last_job_id = ?, updated_at = ? WHERE name = ? AND last_tick < ? AND paused = 0",
	qPeriodicClearJob: "UPDATE {periodic} SET last_job_id = '' WHERE name = ?",
	qPeriodicList:     "SELECT name, schedule, last_tick, next_tick, last_job_id, paused, updated_at, template FROM {periodic} ORDER BY name",
	qPeriodicPause:    "UPDATE {periodic} SET paused = ? WHERE name = ?",
	qPeriodicExists:   "SELECT COUNT(*) FROM {periodic} WHERE name = ?",
	qTagMonitor:       "INSERT IGNORE INTO {tags} (tag, since_us) SELECT ?, ? FROM DUAL WHERE (SELECT COUNT(*) FROM {tags}) < ?",
	qTagRecord: `REPLACE INTO {tag_jobs} (tag, list, id, queue, name, state, at_us, attempts, error)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE EXISTS (SELECT 1 FROM {tags} WHERE tag = ?)`,
	qTagExists:       "SELECT COUNT(*) FROM {tags} WHERE tag = ?",
	qTagUnmonitor:    "DELETE FROM {tags} WHERE tag = ?",
	qTagDropJobs:     "DELETE FROM {tag_jobs} WHERE tag = ?",
	qTagList:         "SELECT tag FROM {tags} ORDER BY tag",
	qTagCutoff:       "SELECT at_us, id FROM {tag_jobs} WHERE tag = ? AND list = ? ORDER BY at_us DESC, id DESC LIMIT 1 OFFSET ?",
	qTagTrim:         "DELETE FROM {tag_jobs} WHERE tag = ? AND list = ? AND (at_us < ? OR (at_us = ? AND id <= ?))",
	qResultPut:       "REPLACE INTO {results} (id, result, expires_us) VALUES (?, ?, ?)",
	qResultPin:       "REPLACE INTO {results} (id, result, expires_us, keep_us) VALUES (?, ?, ?, ?)",
	qResultGet:       "SELECT result FROM {results} WHERE id = ? AND expires_us > ?",
	qPruneResults:    "DELETE FROM {results} WHERE expires_us <= ?",
	qTagJobs:         "SELECT id, queue, name, state, at_us, attempts, error FROM {tag_jobs} WHERE tag = ? AND list = ? ORDER BY at_us DESC, id DESC LIMIT ?",
	qLeaseRowInsert:  "INSERT IGNORE INTO {meta} (name, value, expires_at) VALUES (?, '', 0)",
	qPeriodicInsert:  "INSERT IGNORE INTO {periodic} (name, schedule, last_tick, next_tick, last_job_id, updated_at, template) VALUES (?, ?, ?, ?, '', ?, ?)",
	qJob:             "SELECT " + jobCols + " FROM {jobs} WHERE id = ?",
	qJobState:        "SELECT state FROM {jobs} WHERE id = ?",
	qPendingByKey:    "SELECT id FROM {jobs} WHERE queue = ? AND unique_key = ? AND state = 'pending'",
	qNotPendingOfIDs: "SELECT id FROM {jobs} WHERE id IN (?) AND state NOT IN ('pending', 'grouped', 'sequenced')",
	qGroupMark:       "UPDATE {jobs} SET state = 'grouped' WHERE id IN (?) AND state = 'pending'",
	qGroupedOf:       "SELECT " + jobCols + " FROM {jobs} WHERE queue IN (?) AND name = ? AND state = 'grouped' ORDER BY seq FOR UPDATE SKIP LOCKED",
	qGroupedSeqs:     "SELECT queue, seq FROM {jobs} WHERE queue IN (?) AND name = ? AND state = 'grouped' AND seq <= ?",
	qPause:           "INSERT IGNORE INTO {pauses} (queue, paused_at) VALUES (?, ?)",
	qUniqueTake:      "INSERT IGNORE INTO {uniques} (queue, unique_key, expires_at) VALUES (?, ?, ?)",
	qMetricsUpsert: `INSERT INTO {run_metrics} (
  span_s, at_s, queue, name, processed, failed, runtime_total_us, runtime_max_us, wait_total_us,
  rt0, rt1, rt2, rt3, rt4, rt5, rt6, rt7, rt8, rt9, rt10, rt11, rt12, rt13, rt14, rt15, rt16, rt17,
  rt18, rt19, rt20, rt21, rt22, rt23)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
  processed = processed + VALUES(processed), failed = failed + VALUES(failed),
  runtime_total_us = runtime_total_us + VALUES(runtime_total_us),
  runtime_max_us = GREATEST(runtime_max_us, VALUES(runtime_max_us)),
  wait_total_us = wait_total_us + VALUES(wait_total_us), rt0 = rt0 + VALUES(rt0),
  rt1 = rt1 + VALUES(rt1), rt2 = rt2 + VALUES(rt2), rt3 = rt3 + VALUES(rt3),
  rt4 = rt4 + VALUES(rt4), rt5 = rt5 + VALUES(rt5), rt6 = rt6 + VALUES(rt6),
  rt7 = rt7 + VALUES(rt7), rt8 = rt8 + VALUES(rt8), rt9 = rt9 + VALUES(rt9),
  rt10 = rt10 + VALUES(rt10), rt11 = rt11 + VALUES(rt11), rt12 = rt12 + VALUES(rt12),
  rt13 = rt13 + VALUES(rt13), rt14 = rt14 + VALUES(rt14), rt15 = rt15 + VALUES(rt15),
  rt16 = rt16 + VALUES(rt16), rt17 = rt17 + VALUES(rt17), rt18 = rt18 + VALUES(rt18),
  rt19 = rt19 + VALUES(rt19), rt20 = rt20 + VALUES(rt20), rt21 = rt21 + VALUES(rt21),
  rt22 = rt22 + VALUES(rt22), rt23 = rt23 + VALUES(rt23)`,
	qWorkerUpsert: `INSERT INTO {workers} (id, host, pid, queues, concurrency, started_at, last_seen, running, reserved, max_attempts)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE host = VALUES(host), pid = VALUES(pid), queues = VALUES(queues),
  concurrency = VALUES(concurrency), last_seen = VALUES(last_seen), running = VALUES(running), reserved = VALUES(reserved),
  max_attempts = VALUES(max_attempts)`,
}
