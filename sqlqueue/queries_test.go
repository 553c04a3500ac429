package sqlqueue

import (
	"strings"
	"testing"
)

// pairQueries and byIDQueries are the statements of lease changes that
// match (id, token) pairs (SQLite) and that change locked rows by primary
// key (MySQL).
var (
	pairQueries = []query{qStartLeasesPairs, qAckLeasesPairs, qDoneLeasesPairs, qExtendLeasesPairs}
	byIDQueries = []query{qStartByID, qAckByID, qDoneByID, qExtendByID, qLockLeases, qAckLeasesReturning, qSubtractCounts}
)

// TestQueriesRender checks that every dialect writes every named
// statement (but those it runs its own way) and that rendering leaves no
// table template behind.
func TestQueriesRender(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d        Dialect
		optional []query
	}{
		{Postgres, append([]query{qFoldShards, qFoldAdd, qClaimSelect, qClaimSelectBelow, qClaimSelectFrom, qClaimSelectTo, qClaimUpdate, qInsertJob, qInsertJobHeld, qJobsInserted, qJobsInsertedSince,
			qReviveLock, qDeleteJob, qChangedRowsProbe, qFoldDelete}, append(pairQueries, byIDQueries...)...)},
		{SQLite, append([]query{qFoldCounts, qFoldShards, qFoldAdd, qClaim, qClaimFrom, qClaimSelectFrom, qClaimSelectTo, qStartAckLeases, qStartDoneLeases, qInsertJobsNotify, qInsertJobsHeldNotify, qNotify, qInsertJob, qInsertJobHeld,
			qJobsInserted, qJobsInsertedSince, qReviveLock, qDeleteJob, qChangedRowsProbe, qFoldDelete, qVacuumDue, qVacuum, qVacuumAnalyze}, byIDQueries...)},
		{MySQL, append([]query{qPriorities, qFoldCounts, qClaim, qClaimFrom, qStartAckLeases, qStartDoneLeases, qInsertJobsNotify, qInsertJobsHeldNotify, qNotify, qRevive, qReviveHeld,
			qVacuumDue, qVacuum, qVacuumAnalyze}, pairQueries...)},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			t.Parallel()
			d, err := dialectFor(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			r := render(d, names(d, "meridian_jobs"), d.queries()...)
			for _, bad := range unrendered(r, tc.optional...) {
				t.Errorf("statement %s", bad)
			}
		})
	}
}

// TestExpandLists checks the list marks of a template.
func TestExpandLists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tmpl string
		n    int
		want string
	}{
		{"a IN ({list ?})", 3, "a IN (?, ?, ?)"},
		{"VALUES {list (?, ?, 'p')}", 2, "VALUES (?, ?, 'p'), (?, ?, 'p')"},
		{"a IN ({list ?}) AND (a, b) IN ({list (?, ?)}) AND c > ?", 2, "a IN (?, ?) AND (a, b) IN ((?, ?), (?, ?)) AND c > ?"},
		{"no marks", 4, "no marks"},
	} {
		if got := expandLists(tc.tmpl, tc.n); got != tc.want {
			t.Errorf("expandLists(%q, %d) = %q, want %q", tc.tmpl, tc.n, got, tc.want)
		}
	}
	if strings.Contains(expandLists("{list ?}", 0), "?") {
		t.Error("an empty list holds a placeholder")
	}
}
