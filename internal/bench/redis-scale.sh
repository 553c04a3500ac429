#!/usr/bin/env bash
# The Redis scale measurement (docs/benchmarks.md, "Redis: one server
# against a Cluster of 3 and 6 masters"): the same client workload, jobs
# spread over QUEUES queues by `meridian bench --queues`, against a private
# standalone redis-server, then private Clusters of 3 and of 6 masters
# without replicas (.ci/redis-cluster), interleaved for ROUNDS rounds. Each
# server has no persistence and is stopped and deleted after its run, so
# every run starts on empty servers. Run it from the repository's root:
#
#   internal/bench/redis-scale.sh [OUT_DIR]
#
# Environment (defaults): BASE=7400 (ports BASE..BASE+6 are used), ROUNDS=3,
# JOBS=200000, QUEUES=6, WORKERS=6, CONCURRENCY=200, DURATION=8s,
# MODES=burndown,continuous, SETUPS="1 3 6" (1: the standalone server).
# Every figure line of each run goes to OUT_DIR/<round>-<setup>.txt
# (default: a new temporary directory) and the throughput and server CPU
# lines to standard output.
set -euo pipefail

base=${BASE:-7400}
rounds=${ROUNDS:-3}
jobs=${JOBS:-200000}
queues=${QUEUES:-6}
workers=${WORKERS:-6}
concurrency=${CONCURRENCY:-200}
duration=${DURATION:-8s}
modes=${MODES:-burndown,continuous}
setups=${SETUPS:-1 3 6}
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/meridian-redis-scale-XXXXXX")}
mkdir -p "$out"
bin=$out/meridian
go build -o "$bin" ./cmd/meridian
dir=${TMPDIR:-/tmp}/meridian-redis-scale-$base

cleanup() {
	MERIDIAN_REDIS_CLUSTER_DIR=$dir .ci/redis-cluster stop "$base" || true
	if [ -f "$dir-1/pid" ]; then
		pid=$(cat "$dir-1/pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	fi
	rm -rf "$dir-1" || true
}
trap cleanup EXIT

# start brings up the setup (1: one server; n: a Cluster of n masters)
# and prints its bench URL.
start() {
	if [ "$1" = 1 ]; then
		mkdir -p "$dir-1"
		redis-server --bind 127.0.0.1 --port "$base" --dir "$dir-1" --save '' --appendonly no \
			--daemonize yes --pidfile "$dir-1/pid" --logfile "$dir-1/log" >/dev/null
		for _ in $(seq 1 50); do redis-cli -p "$base" ping >/dev/null 2>&1 && break; sleep 0.1; done
		echo "redis://127.0.0.1:$base/0"
		return
	fi
	local addrs url
	addrs=$(MERIDIAN_REDIS_CLUSTER_DIR=$dir .ci/redis-cluster start "$base" "$1" 0)
	url="redis://${addrs%%,*}?cluster=true"
	for a in ${addrs//,/ }; do url="$url&addr=$a"; done
	echo "$url"
}

for r in $(seq 1 "$rounds"); do
	for s in $setups; do
		url=$(start "$s")
		f=$out/$r-$s.txt
		{
			echo "round $r, setup $s master(s), $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
			"$bin" bench --driver redis --redis-url "$url" --modes "$modes" --jobs "$jobs" --queues "$queues" \
				--workers "$workers" --concurrency "$concurrency" --duration "$duration" 2>/dev/null
			echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
		} >"$f"
		cleanup
		grep -E 'round|load|work|server CPU|core-second' "$f"
	done
done
echo "raw results in $out"
