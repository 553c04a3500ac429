package main

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
)

func TestKindOf(t *testing.T) {
	t.Parallel()
	tests := []struct{ key, prefix, want string }{
		{"{bench_x1:default}:j:0193a1b2c3d4e5f60718293a4b5c6d7e", "bench_x1", "{p:default}:j:<id>"},
		{"{bench_x1:default}:ready", "bench_x1", "{p:default}:ready"},
		{"{bench_x1}:ids", "bench_x1", "{p}:ids"},
		{"asynq:{default}:t:5f2b3c1e-8d7a-4b6c-9e0f-1a2b3c4d5e6f", "", "asynq:{default}:t:<id>"},
		{"asynq:{default}:unique:meridian_bench:9e107d9d372bb6826bd81d3542a419d6", "", "asynq:{default}:unique:meridian_bench:<id>"},
		{"asynq:queues", "", "asynq:queues"},
	}
	for _, tc := range tests {
		if got := kindOf(tc.key, tc.prefix); got != tc.want {
			t.Errorf("kindOf(%q, %q) = %q, want %q", tc.key, tc.prefix, got, tc.want)
		}
	}
}

// TestMemoryRuns queues a few jobs of each variant for both systems on a
// real server and checks the breakdown: one job hash per job on each
// side, unique keys only where the jobs are unique, and a total per job.
func TestMemoryRuns(t *testing.T) {
	const jobs = "300"
	var out strings.Builder
	err := run(context.Background(), []string{"--redis-addr", redisAddr(t), "--redis-db", "14", "--rounds", "0", "--memory-jobs", jobs}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	table := out.String()
	row := func(variant, system, kind string) []string {
		t.Helper()
		re := regexp.MustCompile(`(?m)^\s*` + jobs + ` ` + variant + `\s+` + system + `\s+` + regexp.QuoteMeta(kind) + `\s+(.*)$`)
		m := re.FindStringSubmatch(table)
		if m == nil {
			return nil
		}
		return strings.Fields(m[1])
	}
	for _, v := range []string{"ready", "scheduled", "unique"} {
		for _, c := range []struct{ system, hash string }{{"asynq", "asynq:{default}:t:<id>"}, {"Meridian", "{p:default}:j:<id>"}} {
			if r := row(v, c.system, c.hash); len(r) != 4 || r[0] != "hash" || r[1] != jobs {
				t.Errorf("%s, %s: job hash row %q, want a hash per job (%s keys) in\n%s", v, c.system, r, jobs, table)
			}
			for _, total := range []string{"sum of the keys", "INFO used_memory growth"} {
				if r := row(v, c.system, total); len(r) != 1 || r[0] == "0.0" {
					t.Errorf("%s, %s: %q row %q, want a figure per job in\n%s", v, c.system, total, r, table)
				}
			}
		}
		asynqUnique := row(v, "asynq", "asynq:{default}:unique:meridian_bench:<id>") != nil
		meridianUnique := row(v, "Meridian", "{p:default}:uniq") != nil
		if want := v == "unique"; asynqUnique != want || meridianUnique != want {
			t.Errorf("%s: unique keys asynq %v, Meridian %v; want %v for both in\n%s", v, asynqUnique, meridianUnique, want, table)
		}
	}
}
