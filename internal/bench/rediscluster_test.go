package bench

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestNewRedisURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		name    string
		addrs   []string
		wantErr bool
	}{
		{url: "redis://127.0.0.1:6379/3", name: "redis", addrs: []string{"127.0.0.1:6379"}},
		{url: "redis://127.0.0.1:7400?addr=127.0.0.1:7401&addr=127.0.0.1:7402", name: "rcluster",
			addrs: []string{"127.0.0.1:7400", "127.0.0.1:7401", "127.0.0.1:7402"}},
		{url: "redis://127.0.0.1:7400?cluster=true", name: "rcluster", addrs: []string{"127.0.0.1:7400"}},
		{url: "redis://127.0.0.1:6379/4?cluster=false", name: "redis", addrs: []string{"127.0.0.1:6379"}},
		{url: "redis://127.0.0.1:7400?cluster=maybe", wantErr: true},
		{url: "redis://127.0.0.1:7400/5?addr=127.0.0.1:7401", wantErr: true}, // a Cluster has DB 0 only
		{url: "http://127.0.0.1:6379", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			r, err := NewRedis(tt.url)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("NewRedis(%q) = %+v, want an error", tt.url, r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Name() != tt.name {
				t.Errorf("Name() = %q, want %q", r.Name(), tt.name)
			}
			if got := strings.Split(r.addrs(), ","); !slices.Equal(got, tt.addrs) {
				t.Errorf("addresses %q, want %q", got, tt.addrs)
			}
		})
	}
}

func TestParseInfoSumFields(t *testing.T) {
	t.Parallel()
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.0\r\n\r\n# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n"
	m := parseInfo(info)
	if m["used_cpu_sys"] != "1.250000" || m["used_memory"] != "1048576" || m["used_memory_human"] != "1.00M" {
		t.Fatalf("parseInfo = %v", m)
	}
	if _, ok := m["# CPU"]; ok {
		t.Errorf("a section header was read as a field: %v", m)
	}
	nodes := map[string]map[string]string{
		"a:1": m,
		"b:2": parseInfo("used_cpu_sys:0.5\nused_cpu_user:0.25\nused_memory:10\n"),
	}
	got, err := sumFields(nodes, "used_cpu_user", "used_cpu_sys")
	if err != nil {
		t.Fatal(err)
	}
	if got["a:1"] != 3.75 || got["b:2"] != 0.75 || len(got) != 2 {
		t.Errorf("sumFields = %v, want a:1 3.75, b:2 0.75", got)
	}
	nodes["c:3"] = parseInfo("used_cpu_user:1\n")
	if _, err := sumFields(nodes, "used_cpu_user", "used_cpu_sys"); err == nil || !strings.Contains(err.Error(), "c:3") {
		t.Errorf("a node without used_cpu_sys: err %v, want one naming c:3", err)
	}
}

func TestKeySlot(t *testing.T) {
	t.Parallel()
	// The slots CLUSTER KEYSLOT answers (Redis' own documentation and
	// test suite: 123456789 has CRC16 0x31C3).
	for key, want := range map[string]int{"123456789": 0x31C3, "foo": 12182, "bar": 5061, "": 0} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestSpreadNames(t *testing.T) {
	t.Parallel()
	// Three masters owning thirds of the slots, as redis-cli --cluster
	// create assigns them.
	owner := make([]string, slotCount)
	for i := range owner {
		switch {
		case i <= 5460:
			owner[i] = "127.0.0.1:7400"
		case i <= 10922:
			owner[i] = "127.0.0.1:7401"
		default:
			owner[i] = "127.0.0.1:7402"
		}
	}
	names, err := spreadNames("rs-p", 7, owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 7 {
		t.Fatalf("%d names, want 7: %q", len(names), names)
	}
	masters := []string{"127.0.0.1:7400", "127.0.0.1:7401", "127.0.0.1:7402"}
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			t.Errorf("name %q twice in %q", n, names)
		}
		if got := owner[keySlot("rs-p:"+n)]; got != masters[i%3] {
			t.Errorf("queue %d (%q) is on %s, want %s", i, n, got, masters[i%3])
		}
	}
	if _, err := spreadNames("rs-p", 2, make([]string, slotCount)); err == nil {
		t.Error("no slot served: want an error")
	}
}

func TestRotated(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b", "c"}
	for i, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotated(names, i); !slices.Equal(got, want) {
			t.Errorf("rotated(%q, %d) = %q, want %q", names, i, got, want)
		}
	}
	if got := rotated(nil, 2); got != nil {
		t.Errorf("rotated(nil) = %q, want nil", got)
	}
}

func TestNodeFigures(t *testing.T) {
	t.Parallel()
	before := map[string]time.Duration{"a": time.Second, "b": 2 * time.Second, "c": 0, "gone": time.Second}
	after := map[string]time.Duration{"a": 1100 * time.Millisecond, "b": 2300 * time.Millisecond, "c": 200 * time.Millisecond, "new": time.Hour}
	figs := nodeFigures("work 1000", 1000, before, after)
	want := map[string]float64{ // ms per 1,000 jobs: a 100, b 300, c 200
		"work 1000: server CPU per 1,000 jobs per master, mean of 3":    200,
		"work 1000: server CPU per 1,000 jobs, busiest of 3 masters":    300,
		"work 1000: server CPU per 1,000 jobs, least busy of 3 masters": 100,
	}
	if len(figs) != len(want) {
		t.Fatalf("figures %+v, want %v", figs, want)
	}
	for _, f := range figs {
		if w, ok := want[f.Name]; !ok || f.Value != w || f.Unit != Milliseconds {
			t.Errorf("figure %+v, want one of %v in ms", f, want)
		}
	}
}

func TestRunRedisCluster(t *testing.T) {
	t.Parallel()
	env := os.Getenv("MERIDIAN_REDIS_CLUSTER")
	if env == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MERIDIAN_REDIS_CLUSTER is not set (CI=true needs every server)")
		}
		t.Skip("MERIDIAN_REDIS_CLUSTER is not set: skipping the Redis Cluster (.ci/redis-cluster start prints it)")
	}
	addrs := strings.Split(env, ",")
	u := "redis://" + addrs[0] + "?cluster=true"
	for _, a := range addrs[1:] {
		u += "&addr=" + a
	}
	target, err := NewRedis(u)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rdb.Close()
	n := countMasters(t, rdb)
	o := tiny
	o.Jobs = 600
	o.Queues = n
	o.Workers = n
	o.BaselineDuration = 200 * time.Millisecond
	o.Modes = []Mode{ModeBurnDown, ModeContinuous}
	rep, err := Run(ctx, target, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Driver != "rcluster" {
		t.Errorf("driver %q, want rcluster", rep.Driver)
	}
	for _, want := range []string{
		"burn-down: work 600 (end to end)",
		"burn-down: work 600: server CPU per 1,000 jobs",
		"burn-down: work 600: jobs per server core-second",
		"burn-down: work 600: server CPU per 1,000 jobs, busiest of",
		"continuous: work while dispatching",
		"burn-down: queue 600: store memory per queued job",
	} {
		if f, ok := rep.Figure(want); !ok || !(f.Value > 0) {
			t.Errorf("figure %q = %+v (found %v), want a positive value: %+v", want, f, ok, rep.Figures)
		}
	}
	if _, ok := rep.Figure("burn-down: work 600: server CPU per 1,000 jobs per master, mean of " + strconv.Itoa(n)); !ok {
		t.Errorf("no per-master figure over %d masters: %+v", n, rep.Figures)
	}
	// Every key the queues and the baseline wrote is gone, on every master.
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, _, err := c.Scan(ctx, 0, "*"+tablePrefix+"*", 10_000).Result()
		if err == nil && len(keys) > 0 {
			t.Errorf("%d keys left behind on %s, e.g. %q", len(keys), c.Options().Addr, keys[0])
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func TestSpreadQueuesCluster(t *testing.T) {
	t.Parallel()
	env := os.Getenv("MERIDIAN_REDIS_CLUSTER")
	if env == "" {
		t.Skip("MERIDIAN_REDIS_CLUSTER is not set: skipping the Redis Cluster")
	}
	addrs := strings.Split(env, ",")
	target, err := NewRedis("redis://" + addrs[0] + "?cluster=true")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, drop, err := target.NewQueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer drop(ctx)
	names, err := target.SpreadQueues(ctx, q, 6)
	if err != nil {
		t.Fatal(err)
	}
	// The server's own CLUSTER KEYSLOT and slot map say where each
	// queue's keys live: the queues cover every master.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rdb.Close()
	seen := map[string]bool{}
	for _, n := range names {
		prefix := q.(interface{ Prefix() string }).Prefix()
		key := "{" + prefix + ":" + n + "}:ready"
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := keySlot(prefix + ":" + n); int(slot) != want {
			t.Errorf("CLUSTER KEYSLOT %s = %d, keySlot says %d", key, slot, want)
		}
		c, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		seen[c.Options().Addr] = true
	}
	masters := countMasters(t, rdb)
	if len(seen) != min(masters, len(names)) {
		t.Errorf("queues %q fall on %d masters, want %d", names, len(seen), min(masters, len(names)))
	}
}

// countMasters returns how many masters rdb's Cluster has.
func countMasters(t *testing.T, rdb *redis.ClusterClient) int {
	t.Helper()
	var n atomic.Int64 // ForEachMaster calls from a goroutine per master
	if err := rdb.ForEachMaster(context.Background(), func(context.Context, *redis.Client) error { n.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	return int(n.Load())
}
