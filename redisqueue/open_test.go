package redisqueue_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/redisqueue"
)

// TestOpenRefuses checks what queue.Open refuses before it connects: a
// parameter neither redisqueue nor go-redis reads, a prefix that would
// change the hash tags, a malformed query.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, want string
	}{
		{"redis://127.0.0.1:1/0?tabel=jobs", `unknown URL parameter "tabel"`},
		{"rediss://127.0.0.1:1/0?prefix=a%7Bb", "letters, digits"},
		{"redis://127.0.0.1:1/0?prefix=", "letters, digits"},
		{"redis://127.0.0.1:1/0?prefix=a:b", "letters, digits"},
		{"redis://127.0.0.1:1/0?prefix=a;b", `parameter "prefix" contains a ";"`},
		{"redis://127.0.0.1:1/x", "invalid database number"},
		{"redis://127.0.0.1:1/0?setup=no", "not a boolean"},
		{"redis://127.0.0.1:1/0?push_lanes=two", "must be a whole number"},
		{"redis://127.0.0.1:1/0?push_lanes=-1", "want 0 to 1024"},
		{"redis://127.0.0.1:1/0?push_lanes=1025", "want 0 to 1024"},
		{"redis://127.0.0.1:1?addr=127.0.0.1:2&db=1", `unknown URL parameter "db"`},
		{"redis://127.0.0.1:1?addr=127.0.0.1:2&tabel=jobs", `unknown URL parameter "tabel"`},
		{"redis://127.0.0.1:1/3?addr=127.0.0.1:2", "database 0 only"},
		{"redis://127.0.0.1:1?cluster=maybe", "not a boolean"},
		{"redis://127.0.0.1:1?cluster=false&addr=127.0.0.1:2", "cluster=false with addr="},
		{"redis://127.0.0.1:1?addr=nonsense", "unable to parse addr"},
		{"redis://127.0.0.1:1?cluster=true&read_only=true", "connecting to the Cluster at 127.0.0.1:1"},
	}
	for _, tc := range tests {
		q, err := queue.Open(t.Context(), tc.url)
		if err == nil {
			q.Close()
			t.Errorf("Open(%q) succeeded, want it refused", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", tc.url, err, tc.want)
		}
	}
}

// TestOpenURL opens a redis:// URL with a prefix and go-redis'
// parameters, and works a job through it.
func TestOpenURL(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	u := url.URL{Scheme: "redis", Host: rdb.Options().Addr, Path: "/" + strconv.Itoa(rdb.Options().DB),
		RawQuery: url.Values{"prefix": {p}, "pool_size": {"4"}, "dial_timeout": {"2s"}}.Encode()}
	q, err := queue.Open(t.Context(), u.String())
	if err != nil {
		t.Fatalf("Open(%s): %v", u.String(), err)
	}
	defer q.Close()
	if rq, ok := q.(*redisqueue.Queue); !ok || rq.Prefix() != p {
		t.Fatalf("Open returned %T with prefix %v, want a *redisqueue.Queue with prefix %s", q, q, p)
	}
	if err := q.Push(t.Context(), queue.Job{Queue: "url", Name: "x"}); err != nil {
		t.Fatal(err)
	}
	// The job is under the prefix, seen through another handle.
	if n, err := newQueue(t, rdb, p).Len(t.Context(), "url"); err != nil || n != 1 {
		t.Fatalf("Len through another handle = %d, %v; want 1", n, err)
	}
}

// TestNewClients checks which clients New takes: a Cluster's, and not a
// Ring's, which shards on the client.
func TestNewClients(t *testing.T) {
	t.Parallel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	q, err := redisqueue.New(cc)
	if err != nil {
		t.Fatalf("New(*redis.ClusterClient) = %v, want a Queue", err)
	}
	q.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	if _, err := redisqueue.New(ring); !errors.Is(err, queue.ErrConfig) {
		t.Fatalf("New(*redis.Ring) = %v, want an error matching ErrConfig", err)
	}
}

// TestWithPushLanes: the push lanes are 0 to 1024, as on the SQL stores.
func TestWithPushLanes(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, n := range []int{-1, 1025} {
		if _, err := redisqueue.New(rdb, redisqueue.WithPushLanes(n)); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("WithPushLanes(%d) = %v, want an error matching ErrConfig", n, err)
		}
	}
	for _, n := range []int{0, 1, 1024} {
		q, err := redisqueue.New(rdb, redisqueue.WithPushLanes(n))
		if err != nil {
			t.Errorf("WithPushLanes(%d): %v", n, err)
			continue
		}
		q.Close()
	}
}

// TestOpenClusterURL opens a Cluster by a URL in ParseClusterURL's form
// (the first node in the host, the others as addr=) and works a job
// through it.
func TestOpenClusterURL(t *testing.T) {
	t.Parallel()
	rdb := clusterClient(t)
	p := clusterPrefix(t, rdb)
	addrs := rdb.Options().Addrs
	v := url.Values{"prefix": {p}, "pool_size": {"4"}, "addr": addrs[1:]}
	u := url.URL{Scheme: "redis", Host: addrs[0], RawQuery: v.Encode()}
	q, err := queue.Open(t.Context(), u.String())
	if err != nil {
		t.Fatalf("Open(%s): %v", u.String(), err)
	}
	defer q.Close()
	for _, n := range []string{"a", "b", "c", "d"} { // spread over the masters
		if err := q.Push(t.Context(), queue.Job{Queue: n, Name: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := newQueue(t, rdb, p).Len(t.Context(), ""); err != nil || n != 4 {
		t.Fatalf("Len through another handle = %d, %v; want 4", n, err)
	}
}

// TestQueueNamesWithBraces checks that queue names holding the escape
// characters and braces get keys of their own: a name is its whole hash
// tag, and no two names share a key.
func TestQueueNamesWithBraces(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q := newQueue(t, rdb, prefix(t, rdb))
	names := []string{"a}b", "a%7Db", "a", "{a}", "a%b", "}"}
	for _, n := range names {
		if err := q.Push(t.Context(), queue.Job{Queue: n, Name: "x"}); err != nil {
			t.Fatalf("Push to %q: %v", n, err)
		}
	}
	for _, n := range names {
		jobs, err := q.Reserve(t.Context(), []string{n}, 10, time.Minute)
		if err != nil || len(jobs) != 1 || jobs[0].Queue != n {
			t.Fatalf("Reserve(%q) = %v, %v; want its one job", n, jobs, err)
		}
		if err := testutil.Ack(t.Context(), q, jobs[0].Lease()); err != nil {
			t.Fatalf("Ack of the job of %q: %v", n, err)
		}
	}
	if n, err := q.Len(t.Context(), ""); err != nil || n != 0 {
		t.Fatalf("Len = %d, %v; want 0", n, err)
	}
}

// TestCapabilities checks what the store answers it has: the core and
// every ability.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	q, err := redisqueue.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	c := driver.CapabilitiesOf(q)
	for _, name := range []string{"Waiter", "Scheduler", "Workflows", "Graphs", "Inspector", "Reporter", "Controller", "Fleet", "Grouper"} {
		if err := c.Require(name); err != nil {
			t.Errorf("Require(%s) = %v, want nil", name, err)
		}
	}
	if m := c.Missing(); len(m) != 0 {
		t.Errorf("Missing() = %q, want none", m)
	}
}

// TestLostJobHash checks that a job whose hash disappeared (deleted by
// hand, or evicted by a maxmemory policy) is dropped from its sets by the
// next reservation instead of coming back half made, and the jobs beside
// it are reserved as usual.
func TestLostJobHash(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	p := prefix(t, rdb)
	q := newQueue(t, rdb, p)
	var ids []string
	for range 3 {
		j := queue.Job{ID: driver.NewID(), Queue: "lost", Name: "x"}
		if err := q.Push(t.Context(), j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if err := rdb.Del(t.Context(), "{"+p+":lost}:j:"+ids[1]).Err(); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Reserve(t.Context(), []string{"lost"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		if j.ID == "" || j.Name != "x" {
			t.Errorf("Reserve returned a half-made job %+v", j)
		}
		got = append(got, j.ID)
	}
	if len(got) != 2 || got[0] != ids[0] || got[1] != ids[2] {
		t.Fatalf("Reserve = %v, want %v without the lost %s", got, []string{ids[0], ids[2]}, ids[1])
	}
	if n, err := q.Len(t.Context(), "lost"); err != nil || n != 2 {
		t.Fatalf("Len = %d, %v; want 2 (the lost job's member gone)", n, err)
	}
}
