package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestPickDrivers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		list    string
		pg, my  string
		redis   string
		want    []string
		wantErr string
	}{
		{name: "default without servers", want: []string{"memory", "sqlite"}},
		{name: "default with servers", pg: "postgres://x", my: "root@tcp(x)/db", redis: "redis://x/0", want: []string{"memory", "sqlite", "postgres", "mysql", "redis"}},
		{name: "listed redis without URL", list: "redis", wantErr: "MERIDIAN_REDIS_ADDR"},
		{name: "listed", list: "postgres, memory,postgres", pg: "postgres://x", want: []string{"postgres", "memory"}},
		{name: "aliases", list: "mariadb,sqlite3", my: "root@tcp(x)/db", want: []string{"mysql", "sqlite"}},
		{name: "listed server without DSN", list: "memory,mysql", wantErr: "MERIDIAN_MYSQL_DSN"},
		{name: "unknown", list: "oracle", wantErr: `unknown driver "oracle"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := pickDrivers(tt.list, map[string]string{"postgres": tt.pg, "mysql": tt.my, "redis": tt.redis}, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("drivers = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBenchBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--jobs", "0"},
		{"--duration", "-1s"},
		{"--modes", "fastest"},
		{"--warmup", "10s", "--duration", "1s"},
		{"--driver", "memory", "extra"},
		{"--no-such-flag"},
		{"--drivers", "redis"},
		{"extra", "--jobs", "10"},
		{"--job-time", "-1ms"},
		{"--balance", "weighted"},
	} {
		if err := benchMain(context.Background(), args, io.Discard, io.Discard); exitCode(err) != exitUsage {
			t.Errorf("meridian bench %v: %v, exit %d; want a usage error, exit %d", args, err, exitCode(err), exitUsage)
		}
	}
	if err := benchMain(context.Background(), []string{"--quick", "-h"}, io.Discard, io.Discard); exitCode(err) != exitOK {
		t.Errorf("meridian bench --quick -h: %v, exit %d; want exit 0", err, exitCode(err))
	}
}

func TestBenchMemory(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	args := []string{"--driver", "memory", "--quick", "--jobs", "2000", "--duration", "300ms", "--warmup", "50ms",
		"--latency-duration", "200ms", "--rate", "500", "--concurrency", "10", "--job-time", "10us", "--balance", "auto"}
	if err := benchMain(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"burn-down: work 2000", "continuous", "dispatch: DispatchMany x1000", "latency p99", "handlers 10µs each", "balance auto"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "inserts/s") {
		t.Errorf("memory printed a baseline:\n%s", out.String())
	}
}
