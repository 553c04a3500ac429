package sqlqueue

import (
	"context"
	"fmt"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// MySQL and MariaDB have no payload search index (see searchIndexer):
// MariaDB ships no ngram full-text parser (its FULLTEXT indexes split
// words at spaces and punctuation, so they cannot answer a substring),
// and the dialect serves both. A search there is the time-budgeted scan
// (see ListJobs) that the dashboard continues by itself.

func (mysqlDialect) enableSearch(context.Context, DB, tableNames) error {
	return fmt.Errorf("MySQL and MariaDB have no payload search index (MariaDB has no ngram parser); searches scan within a time budget: %w", queue.ErrUnsupported)
}

func (mysqlDialect) disableSearch(context.Context, DB, tableNames) error { return nil }

func (mysqlDialect) searchProbe(tableNames) (string, []any) { return "SELECT 0", nil }

func (mysqlDialect) indexedMatch(tableNames, string) (string, []any, bool) { return "", nil, false }
