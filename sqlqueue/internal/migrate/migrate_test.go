package migrate

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFiles checks every dialect's files: numbered without gaps, an up
// and a down file each, every name in braces known, and each up file
// recording its own version.
func TestFiles(t *testing.T) {
	vars := map[string]string{}
	for _, n := range []string{"jobs", "pauses", "workers", "metrics", "run_metrics", "meta", "periodic", "uniques", "claim_idx", "unique_idx", "state_idx", "finished_idx", "seq_idx", "list_idx", "counts", "count_ins_trg", "count_del_trg", "count_upd_trg", "count_ins_fn", "count_del_fn", "count_upd_fn", "sched_ins_trg", "sched_del_trg", "sched_upd_trg", "sched_ins_fn", "sched_del_fn", "sched_upd_fn", "leases_fn", "batches", "batch_jobs", "batches_seq_idx", "batches_finished_idx", "fleet", "tags", "tag_jobs", "tag_jobs_at_idx", "results", "results_exp_idx", "graphs", "graph_nodes", "graph_edges", "graphs_seq_idx", "graph_nodes_job_idx", "graph_nodes_name_idx", "graphs_finished_idx", "sequences", "sequence_jobs", "sequences_head_idx", "sequence_jobs_key_idx", "sequence_jobs_job_idx"} {
		vars[n] = `"t_` + n + `"`
	}
	for _, d := range []*Dialect{Postgres, MySQL, SQLite} {
		ms, err := d.Migrations()
		if err != nil {
			t.Fatalf("%s: %v", d.Dir, err)
		}
		if len(ms) == 0 || ms[0].Name != "init" {
			t.Fatalf("%s: migrations %v, want 0001_init first", d.Dir, ms)
		}
		for _, m := range ms {
			for _, text := range []string{m.Up, m.Down} {
				if _, err := Render(text, vars); err != nil {
					t.Errorf("%s/%04d: %v", d.Dir, m.Version, err)
				}
			}
			up := Statements(m.Up)
			last := up[len(up)-1]
			if !strings.Contains(last, "schema_version") || !strings.Contains(last, "'"+strconv.Itoa(m.Version)+"'") {
				t.Errorf("%s/%04d: the up file's last statement does not record version %d: %s", d.Dir, m.Version, m.Version, last)
			}
		}
	}
}

func TestRender(t *testing.T) {
	vars := map[string]string{"jobs": `"q"`, "meta": `"q_meta"`}
	for _, tc := range []struct{ in, want, err string }{
		{"SELECT 1 FROM {jobs} JOIN {meta}", `SELECT 1 FROM "q" JOIN "q_meta"`, ""},
		{"SELECT '{}', '{a,b}' FROM {jobs}", `SELECT '{}', '{a,b}' FROM "q"`, ""},
		{"SELECT 1 FROM {jobz}", "", "unknown name {jobz}"},
		{"trailing {", "trailing {", ""},
	} {
		got, err := Render(tc.in, vars)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Render(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Render(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestStatements(t *testing.T) {
	in := "-- header\n-- more\nCREATE TABLE a (\n  x INT, -- a column; with a semicolon\n  y INT\n);\n\n-- only a comment\n\nINSERT INTO a VALUES (1);\n-- trailing comment\n"
	want := []string{
		"-- header\n-- more\nCREATE TABLE a (\n  x INT, -- a column; with a semicolon\n  y INT\n)",
		"-- only a comment\n\nINSERT INTO a VALUES (1)",
	}
	if got := Statements(in); !slices.Equal(got, want) {
		t.Errorf("Statements = %q\nwant %q", got, want)
	}
}
