package sqlqueue

import "testing"

// TestQueriesRender checks that every dialect writes every named
// statement (but those it runs its own way) and that rendering leaves no
// table template behind.
func TestQueriesRender(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d        Dialect
		optional []query
	}{
		{Postgres, []query{qFoldShards, qFoldAdd}},
		{SQLite, []query{qFoldCounts, qFoldShards, qFoldAdd}},
		{MySQL, []query{qPriorities, qFoldCounts}},
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
