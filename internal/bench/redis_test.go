package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisTestURL returns the URL of DB 11 of the Redis server that
// MERIDIAN_REDIS_ADDR names, skipping the test when it is unset (failing
// it when CI=true).
func redisTestURL(t *testing.T) string {
	addr := os.Getenv("MERIDIAN_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MERIDIAN_REDIS_ADDR is not set (CI=true needs every server)")
		}
		t.Skip("MERIDIAN_REDIS_ADDR is not set: skipping Redis")
	}
	return "redis://" + addr + "/11"
}

func TestRunRedis(t *testing.T) {
	t.Parallel()
	target, err := NewRedis(redisTestURL(t))
	if err != nil {
		t.Fatal(err)
	}
	o := tiny
	o.BaselineDuration = 200 * time.Millisecond
	o.Modes = []Mode{ModeBurnDown, ModeLatency}
	rep, err := Run(context.Background(), target, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BaselineName != "1-key HSET" || !(rep.Baseline > 0) {
		t.Errorf("baseline %q = %v, want a positive rate of 1-key HSETs", rep.BaselineName, rep.Baseline)
	}
	for _, want := range []string{"burn-down: work", "burn-down: queue", "latency p99"} {
		if _, ok := rep.Figure(want); !ok {
			t.Errorf("no %q figure in %+v", want, rep.Figures)
		}
	}
	var mem, server bool
	for _, f := range rep.Figures {
		switch {
		case strings.Contains(f.Name, "store memory per queued job"):
			// used_memory is the whole server's: other tests writing
			// to it meanwhile move the figure, so only its presence
			// is checked.
			mem = true
		case strings.Contains(f.Name, "work") && strings.Contains(f.Name, "server CPU"):
			server = f.Value > 0
		}
	}
	if !mem || !server {
		t.Errorf("store memory per job found %v, server CPU per job found %v, want both: %+v", mem, server, rep.Figures)
	}
	// Every key the queues and the baseline wrote is gone.
	opts, _ := redis.ParseURL(redisTestURL(t))
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	keys, _, err := rdb.Scan(context.Background(), 0, "*"+tablePrefix+"*", 10_000).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		t.Errorf("%d keys left behind, e.g. %q", len(keys), keys[0])
	}
}
