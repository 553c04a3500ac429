package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/bench"
	"github.com/meridianjobs/meridian/queue"
)

// JobName makes benchArgs Meridian's bench job too (internal/bench's job
// type has the same name and JSON form), for the memory measurement's
// pushes with options.
func (benchArgs) JobName() string { return taskType }

// memoryVariant is one way of queuing the memory measurement's jobs: the
// burn-down's ready jobs, jobs scheduled an hour ahead, or ready jobs each
// unique by its payload.
type memoryVariant struct {
	name     string
	meridian []queue.Option
	asynq    []asynq.Option
	distinct bool // payloads differ (T = the job's number), as uniqueness by payload needs
}

var memoryVariants = []memoryVariant{
	{name: "ready"},
	{name: "scheduled", meridian: []queue.Option{queue.Delay(time.Hour)}, asynq: []asynq.Option{asynq.ProcessIn(time.Hour)}},
	{name: "unique", meridian: []queue.Option{queue.UniqueByPayload()}, asynq: []asynq.Option{asynq.Unique(24 * time.Hour)}, distinct: true},
}

// memorySample is how many keys of each kind MEMORY USAGE reads.
const memorySample = 200

// keyKind is the memory held by the keys of one kind.
type keyKind struct {
	kind    string // the key with its hash tag's prefix as "p" and IDs as <id>
	typ     string // the Redis type of the first key read
	keys    int    // how many keys of the kind SCAN found
	sampled int    // how many MEMORY USAGE read
	bytes   int64  // the sample's mean times keys
}

// memoryResult is one system's memory with n jobs of one variant queued.
type memoryResult struct {
	system, variant string
	jobs            int
	kinds           []keyKind
	used            int64 // INFO memory used_memory after the fill minus before
}

// measureMemory queues n jobs of each variant for each system (nothing
// works them), reads the memory of their keys by kind and the growth of
// used_memory, and empties the store again.
func measureMemory(ctx context.Context, c config, target *bench.Redis, n int) ([]memoryResult, error) {
	rdb := redis.NewClient(&redis.Options{Addr: c.addr, DB: c.db})
	defer rdb.Close()
	var out []memoryResult
	for _, v := range memoryVariants {
		for _, s := range systems {
			c.opts.Progress("memory, %s, %s: queuing %d jobs", v.name, s, n)
			var r memoryResult
			var err error
			if s == "asynq" {
				r, err = asynqMemory(ctx, c, target, rdb, v, n)
			} else {
				r, err = meridianMemory(ctx, target, rdb, v, n)
			}
			if err != nil {
				return out, fmt.Errorf("memory, %s, %s: %w", v.name, s, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// asynqMemory measures asynq's keys on an emptied database.
func asynqMemory(ctx context.Context, c config, target *bench.Redis, rdb *redis.Client, v memoryVariant, n int) (memoryResult, error) {
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return memoryResult{}, fmt.Errorf("emptying Redis db %d: %w", c.db, err)
	}
	before, err := target.UsedMemory(ctx)
	if err != nil {
		return memoryResult{}, err
	}
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: c.addr, DB: c.db})
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, c.fanout)
	for g := range c.fanout {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := client.EnqueueContext(ctx, asynq.NewTask(taskType, payload(v, i)), v.asynq...); err != nil {
					errs[g] = fmt.Errorf("enqueueing an asynq task: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	err = errors.Join(append(errs, client.Close())...)
	var r memoryResult
	if err == nil {
		r, err = readMemory(ctx, target, rdb, "asynq:*", "", before)
	}
	r.system, r.variant, r.jobs = "asynq", v.name, n
	return r, errors.Join(err, rdb.FlushDB(context.WithoutCancel(ctx)).Err())
}

// meridianMemory measures Meridian's keys under a new prefix, deleted
// afterwards.
func meridianMemory(ctx context.Context, target *bench.Redis, rdb *redis.Client, v memoryVariant, n int) (memoryResult, error) {
	before, err := target.UsedMemory(ctx)
	if err != nil {
		return memoryResult{}, err
	}
	q, drop, err := target.NewQueue(ctx)
	if err != nil {
		return memoryResult{}, err
	}
	prefix := q.(interface{ Prefix() string }).Prefix()
	const chunk = 1000
	for i := 0; i < n && err == nil; i += chunk {
		jobs := make([]queue.Job, 0, chunk)
		for k := i + 1; k <= min(i+chunk, n); k++ {
			var a benchArgs
			if v.distinct {
				a.T = int64(k)
			}
			var j queue.Job
			if j, err = queue.NewJob(a, v.meridian...); err != nil {
				break
			}
			jobs = append(jobs, j)
		}
		if err == nil {
			_, err = q.PushMany(ctx, jobs)
		}
	}
	var r memoryResult
	if err == nil {
		r, err = readMemory(ctx, target, rdb, "{"+prefix+"[:}]*", prefix, before)
	}
	r.system, r.variant, r.jobs = "Meridian", v.name, n
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return r, errors.Join(err, drop(dctx))
}

// payload is the JSON of job i of variant v: T zero as in the burn-down,
// or i where payloads must differ.
func payload(v memoryVariant, i int64) []byte {
	var a benchArgs
	if v.distinct {
		a.T = i
	}
	b, _ := json.Marshal(a) // a struct of one int64 always encodes
	return b
}

// readMemory SCANs the keys matching match, groups them by kind (kindOf),
// reads MEMORY USAGE (SAMPLES 0: every element) of up to memorySample
// keys of each kind, and INFO memory's used_memory less before.
func readMemory(ctx context.Context, target *bench.Redis, rdb *redis.Client, match, prefix string, before uint64) (memoryResult, error) {
	var r memoryResult
	after, err := target.UsedMemory(ctx)
	if err != nil {
		return r, err
	}
	r.used = int64(after) - int64(before)
	kinds := map[string]*keyKind{}
	samples := map[string][]string{}
	iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		k := kindOf(key, prefix)
		if kinds[k] == nil {
			kinds[k] = &keyKind{kind: k}
		}
		kinds[k].keys++
		if len(samples[k]) < memorySample {
			samples[k] = append(samples[k], key)
		}
	}
	if err := iter.Err(); err != nil {
		return r, fmt.Errorf("scanning the keys %s: %w", match, err)
	}
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		k := kinds[name]
		pipe := rdb.Pipeline()
		typ := pipe.Type(ctx, samples[name][0])
		usage := make([]*redis.IntCmd, len(samples[name]))
		for i, key := range samples[name] {
			usage[i] = pipe.MemoryUsage(ctx, key, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return r, fmt.Errorf("reading MEMORY USAGE of the keys %s: %w", name, err)
		}
		var sum int64
		for _, u := range usage {
			sum += u.Val()
		}
		k.typ, k.sampled = typ.Val(), len(usage)
		k.bytes = sum * int64(k.keys) / int64(k.sampled)
		r.kinds = append(r.kinds, *k)
	}
	return r, nil
}

// kindOf names the kind of key: Meridian's prefix as "p", and each part
// (between colons) of 20 characters or more, an ID or a digest, as <id>.
func kindOf(key, prefix string) string {
	if prefix != "" {
		key = strings.Replace(key, "{"+prefix, "{p", 1)
	}
	parts := strings.Split(key, ":")
	for i, p := range parts {
		if len(p) >= 20 {
			parts[i] = "<id>"
		}
	}
	return strings.Join(parts, ":")
}

// writeMemory prints the memory results: per variant and system, each
// kind's keys, type, bytes per key and bytes per queued job, their sum, and
// used_memory's growth per job.
func writeMemory(w io.Writer, rs []memoryResult) error {
	if len(rs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nRedis memory per queued job, by key kind (MEMORY USAGE SAMPLES 0 of up to %d keys of each kind found by SCAN, times the kind's keys; used_memory from INFO memory before and after the fill):\n", memorySample)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "jobs\tsystem\tkey kind\ttype\tkeys\tB/key\tB/job\t")
	for _, r := range rs {
		var sum int64
		for _, k := range r.kinds {
			sum += k.bytes
			fmt.Fprintf(tw, "%d %s\t%s\t%s\t%s\t%d\t%d\t%.1f\t\n", r.jobs, r.variant, r.system, k.kind, k.typ, k.keys, k.bytes/int64(k.keys), float64(k.bytes)/float64(r.jobs))
		}
		fmt.Fprintf(tw, "%d %s\t%s\tsum of the keys\t\t\t\t%.1f\t\n", r.jobs, r.variant, r.system, float64(sum)/float64(r.jobs))
		fmt.Fprintf(tw, "%d %s\t%s\tINFO used_memory growth\t\t\t\t%.1f\t\n", r.jobs, r.variant, r.system, float64(r.used)/float64(r.jobs))
	}
	return tw.Flush()
}
