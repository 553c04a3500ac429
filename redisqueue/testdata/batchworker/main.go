// Command batchworker is the worker process of redisqueue's process
// tests: a Worker over the queues "bm", "cb", "gm", "sq" and "gn" that handles
// TestBatchSIGKILL's batch members and callbacks and logs each handling to
// a Redis list, so that the test can count them across processes it kills,
// TestGraphSIGKILL's graph nodes (wfNode on "gn"), logging each run with
// whether its job was recovered and when it started and ended,
// and TestGroupsSIGKILL's group members (note{Key, N} on "gm", a group
// handler of grace 100 ms and sets of at most 5), logging each set to
// another list as testutil.GroupSet.Line writes it. With
// BATCHWORKER_KILL_AFTER_SETS=K the process sends itself SIGKILL at its
// K-th set: inside the handler, after the log entry and before the ack, or,
// with BATCHWORKER_KILL_AT=ack, as soon as that set's ack is stored.
//
// On queue "sq" it handles TestSequencesSIGKILL's sequence members,
// seqNote{Key, N}, logging a testutil.SeqMark when a run starts and
// another just before it returns (2 ms later) to a third list, whose
// order is the order of the marks across processes, and its plain jobs,
// seqPlain{N}, logging nothing. With BATCHWORKER_KILL_AFTER_SEQ=K the
// process sends itself SIGKILL at its K-th run of a member: after the
// start mark (the run never ends), with BATCHWORKER_KILL_AT=end after the
// end mark (the member runs again), or with BATCHWORKER_KILL_AT=ack as
// soon as its K-th member's ack is stored.
//
// On queues "ch" and "ch2" it handles TestChainMembersSIGKILL's chain
// steps, chainStep{B, M, S} (step S of the chain that is member M of
// batch B), and its batches' callbacks, chainCB, logging each run with
// its job's CreatedAt to a fourth list. With BATCHWORKER_KILL_AFTER_STEPS=N
// the process sends itself SIGKILL up to 5 ms after its K-th step started,
// K drawn from 1 to N, wherever its work then is (a handler, an ack, a step
// of the batch protocol). A kill counted in steps, not in time from the
// start, lands while the process has work: a kill timed from the start
// once came after three processes had done all 300 steps.
//
// Environment: BATCHWORKER_ADDR (host:port or a redis:// URL),
// BATCHWORKER_PREFIX. SIGTERM stops it.
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

// The jobs of TestBatchSIGKILL, TestGroupsSIGKILL, TestSequencesSIGKILL
// and TestGraphSIGKILL (same type names, so the same job names).
type (
	member   struct{ N int }
	wfNode   struct{ N int }
	callback struct{}
	note     struct {
		Key string
		N   int
	}
	seqNote struct {
		Key string
		N   int
	}
	seqPlain  struct{ N int }
	chainStep struct{ B, M, S int }
	chainCB   struct{}
)

func main() {
	addr, prefix := os.Getenv("BATCHWORKER_ADDR"), os.Getenv("BATCHWORKER_PREFIX")
	var o *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if o, err = redis.ParseURL(addr); err != nil {
			log.Fatal(err)
		}
	} else {
		o = &redis.Options{Addr: addr}
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	q, err := redisqueue.New(rdb, redisqueue.WithPrefix(prefix))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	logKey := "{" + prefix + "}:test:handled"
	record := func(ctx context.Context, entry string) error {
		return rdb.RPush(context.WithoutCancel(ctx), logKey, entry).Err()
	}
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler)).Queues("bm", "cb", "gm", "sq", "gn", "ch", "ch2").
		Poll(50 * time.Millisecond).Concurrency(4).Lease(time.Second)
	queue.Handle(w, func(ctx context.Context, m member) error {
		time.Sleep(5 * time.Millisecond) // so that kills find members running
		return record(ctx, fmt.Sprintf("m:%d", m.N))
	})
	queue.Handle(w, func(ctx context.Context, _ callback) error {
		j, _ := queue.JobFromContext(ctx)
		// A callback run again after a kill has its CreatedAt; one pushed
		// twice would have two.
		return record(ctx, fmt.Sprintf("cb:%s:%d", j.Meta[queue.MetaBatchEvent], j.CreatedAt.UnixMilli()))
	})
	queue.Handle(w, func(ctx context.Context, n wfNode) error {
		j, _ := queue.JobFromContext(ctx)
		start := time.Now().UnixNano()
		time.Sleep(5 * time.Millisecond) // so that kills find nodes running
		rc := 0
		if j.Recovered {
			rc = 1
		}
		entry := fmt.Sprintf("%d:%d:%d:%d", n.N, rc, start, time.Now().UnixNano())
		return rdb.RPush(context.WithoutCancel(ctx), "{"+prefix+"}:test:graph", entry).Err()
	})
	killSets, _ := strconv.ParseInt(os.Getenv("BATCHWORKER_KILL_AFTER_SETS"), 10, 64)
	killAtAck := os.Getenv("BATCHWORKER_KILL_AT") == "ack"
	var sets, acked atomic.Int64
	queue.HandleGroup(w, queue.GroupRule{Grace: 100 * time.Millisecond, MaxSize: 5}, func(ctx context.Context, ns []note) error {
		j, _ := queue.JobFromContext(ctx)
		s := testutil.GroupSet{ID: j.ID, Attempt: j.Attempts}
		for _, n := range ns {
			s.Members = append(s.Members, fmt.Sprintf("%s:%d", n.Key, n.N))
		}
		if err := rdb.RPush(context.WithoutCancel(ctx), "{"+prefix+"}:test:sets", s.Line()).Err(); err != nil {
			return err
		}
		if killSets > 0 && !killAtAck && sets.Add(1) == killSets {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return nil
	})
	if killSets > 0 && killAtAck {
		w.Observer(queue.ObserverFunc(func(e queue.Event) {
			if e.Kind == queue.EventDone && e.Job.Name == "note" && acked.Add(1) == killSets {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
	handleSeq(w, rdb, prefix)
	killAfter, _ := strconv.Atoi(os.Getenv("BATCHWORKER_KILL_AFTER_STEPS"))
	handleChains(w, rdb, prefix, killAfter)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// handleSeq registers the handlers of TestSequencesSIGKILL's jobs on w.
func handleSeq(w *queue.Worker, rdb *redis.Client, prefix string) {
	logKey := "{" + prefix + "}:test:seq"
	kill, _ := strconv.ParseInt(os.Getenv("BATCHWORKER_KILL_AFTER_SEQ"), 10, 64)
	at := os.Getenv("BATCHWORKER_KILL_AT")
	var runs, acked atomic.Int64
	queue.Handle(w, func(ctx context.Context, s seqNote) error {
		k := runs.Add(1)
		m := testutil.SeqMark{Member: fmt.Sprintf("%s:%d", s.Key, s.N), Run: fmt.Sprintf("%d.%d", os.Getpid(), k)}
		if err := rdb.RPush(context.WithoutCancel(ctx), logKey, m.Line()).Err(); err != nil {
			return err
		}
		if k == kill && at == "" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond) // the run lasts, so a member let through beside it overlaps it
		m.End = true
		if err := rdb.RPush(context.WithoutCancel(ctx), logKey, m.Line()).Err(); err != nil {
			return err
		}
		if k == kill && at == "end" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return nil
	})
	queue.Handle(w, func(context.Context, seqPlain) error { return nil })
	if kill > 0 && at == "ack" {
		w.Observer(queue.ObserverFunc(func(e queue.Event) {
			if e.Kind == queue.EventDone && e.Job.Name == "seqNote" && acked.Add(1) == kill {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
}

// handleChains registers the handlers of TestChainMembersSIGKILL's jobs
// on w: each run logged as "s:B:M:S:<CreatedAt ms>" or "c:<batch>:<event>:<CreatedAt ms>".
// When killAfter is above 0 the process kills itself up to 5 ms after its
// K-th step started, K drawn from 1 to killAfter.
func handleChains(w *queue.Worker, rdb *redis.Client, prefix string, killAfter int) {
	logKey := "{" + prefix + "}:test:chain"
	var started atomic.Int64
	killAt := int64(0)
	if killAfter > 0 {
		killAt = 1 + rand.Int64N(int64(killAfter))
	}
	queue.Handle(w, func(ctx context.Context, s chainStep) error {
		if started.Add(1) == killAt {
			go func() {
				time.Sleep(time.Duration(rand.IntN(5000)) * time.Microsecond)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}()
		}
		j, _ := queue.JobFromContext(ctx)
		time.Sleep(2 * time.Millisecond) // so that kills find steps running
		return rdb.RPush(context.WithoutCancel(ctx), logKey, fmt.Sprintf("s:%d:%d:%d:%d", s.B, s.M, s.S, j.CreatedAt.UnixMilli())).Err()
	})
	queue.Handle(w, func(ctx context.Context, _ chainCB) error {
		j, _ := queue.JobFromContext(ctx)
		return rdb.RPush(context.WithoutCancel(ctx), logKey,
			fmt.Sprintf("c:%s:%s:%d", j.Meta[queue.MetaBatchOf], j.Meta[queue.MetaBatchEvent], j.CreatedAt.UnixMilli())).Err()
	})
}
