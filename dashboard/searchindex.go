package dashboard

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// searchIndexTTL is how long a QueueInspector reuses its answer to
// whether the store's payload search index is on: the index is made and
// dropped by hand (`meridian search enable`), rarely, and the answer is
// a catalog query a page view need not repeat.
const searchIndexTTL = time.Minute

// SearchIndexSource is a Source whose store may keep a payload search
// index (sqlqueue's EnableSearchIndex, `meridian search enable`): a
// jobs page that searches says whether the search goes through the
// index or scans. ForQueue's Source is one; it answers with an error
// wrapping queue.ErrUnsupported for a driver that keeps no such index
// (memory, Redis), and the page then says nothing of an index.
type SearchIndexSource interface {
	// SearchIndexed reports whether the store's payload search index
	// is on.
	SearchIndexed(ctx context.Context) (bool, error)
}

// searchIndexReporter is a driver that reports its payload search
// index (sqlqueue's Queue).
type searchIndexReporter interface {
	SearchIndexEnabled(ctx context.Context) (bool, error)
}

// SearchIndexed reports whether the driver's payload search index is on
// (see SearchIndexSource), read at most once a minute.
func (qi *QueueInspector) SearchIndexed(ctx context.Context) (bool, error) {
	r, ok := qi.q.(searchIndexReporter)
	if !ok {
		return false, fmt.Errorf("dashboard: reading whether the payload search is indexed: %w", queue.ErrUnsupported)
	}
	return qi.indexed.get(ctx, searchIndexTTL, r.SearchIndexEnabled)
}

// searchIndex is what a jobs page that searches says of the store's
// index: "on", "off", or "" when the Source keeps none or could not say.
func (h *handler) searchIndex(ctx context.Context) string {
	s, ok := h.src.(SearchIndexSource)
	if !ok {
		return ""
	}
	on, err := s.SearchIndexed(ctx)
	switch {
	case err != nil:
		return ""
	case on:
		return "on"
	}
	return "off"
}
