// Command worker is the worker process of sqlqueue's multi-process tests:
// a queue.Worker over the table and database its environment names, until
// SIGTERM. For every job it handles it appends "id start end attempt"
// (Unix nanoseconds, then the job's attempt number: 2 or more when an
// earlier lease on it was lost) to the log file before returning, so a SIGKILL loses no
// record of a job that was acked. The tests build it without -race: it
// exercises the database, not the Go code, and modernc.org/sqlite under the
// race detector is too slow for 20,000 jobs on a small machine.
//
// With WORKER_HOLD_AFTER=N, every job after the process's first N is held:
// its handler writes "held id" to the log file named by WORKER_HOLD_LOG and
// waits until the process is stopped, so a test that kills the process
// then knows it holds a job.
//
// The workflow tests' jobs are logged under a key instead of the job's ID:
// "step-N" for wfStep{N} (a chain's step), "item-N" for wfItem{N} (a
// batch's member) and "cb-EVENT" for wfCallback (a batch's callback). With
// WORKER_HOLD_STEP=N the handler of step N holds it as WORKER_HOLD_AFTER
// does; with WORKER_KILL_AFTER_STEP=N the process sends itself SIGKILL as
// soon as step N is acked (and the next step stored): a crash between two
// steps; a later step that reaches its handler before the kill waits
// there and never completes in that process.
//
// A graph's node, wfNode{N}, is logged as "node-N". With
// WORKER_KILL_AFTER_NODES=K the process sends itself SIGKILL at its K-th
// node: inside the handler, after the log line and before the ack (so the
// node runs again elsewhere: a duplicate run), or, with
// WORKER_KILL_AT=ack, as soon as that node's ack is stored (between a
// node and its dependants' runs).
//
// With WORKER_KILL_AFTER_ITEMS=K the process likewise kills itself at
// its K-th batch member (wfItem), in the handler or, with
// WORKER_KILL_AT=ack, once that member's ack is stored.
//
// A group member, grpNote{Key, N}, is handled by a group handler
// (queue.HandleGroup, grace 100 ms, at most 5 members a set) that logs
// each set as testutil.GroupSet.Line does. With WORKER_KILL_AFTER_SETS=K
// the process sends itself SIGKILL at its K-th set: inside the handler,
// after the log line and before the ack (the set runs again elsewhere),
// or, with WORKER_KILL_AT=ack, as soon as that set's ack is stored.
//
// A sequence member, seqNote{Key, N}, logs a testutil.SeqMark line when
// a run starts and another just before it returns (2 ms later) to the
// file WORKER_SEQ_LOG, which every process opens with O_APPEND: the file
// keeps the order of the marks across processes. With
// WORKER_KILL_AFTER_SEQ=K the process sends itself SIGKILL at its K-th
// run of a member: inside the handler, after the start mark (the run has
// no end) or, with WORKER_KILL_AT=end, after the end mark (the member
// runs again), both before the ack; or, with WORKER_KILL_AT=ack, as soon
// as the K-th member's ack is stored.
//
// WORKER_RATE=N puts a limit of N starts a second across every process
// (queue.Limiter.Rate, one key per job name) in front of the handlers;
// WORKER_CONCURRENCY_LIMIT=N one of N jobs running at once across them.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

type procJob struct{ N int }

// The workflow tests' jobs.
type (
	wfStep     struct{ N int }
	wfItem     struct{ N int }
	wfCallback struct{}
	wfNode     struct{ N int }
	grpNote    struct {
		Key string
		N   int
	}
	seqNote struct {
		Key string
		N   int
	}
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker process:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, err := sql.Open(os.Getenv("WORKER_DRIVER"), os.Getenv("WORKER_SOURCE"))
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := sqlqueue.New(db, sqlqueue.WithTable(os.Getenv("WORKER_TABLE")))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(os.Getenv("WORKER_LOG"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	lease, err := time.ParseDuration(os.Getenv("WORKER_LEASE"))
	if err != nil {
		return err
	}
	sleep, err := time.ParseDuration(os.Getenv("WORKER_SLEEP"))
	if err != nil {
		return err
	}
	w := queue.NewWorker(q).
		Slog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))).
		Concurrency(8).Poll(20 * time.Millisecond).Lease(lease).ShutdownTimeout(5 * time.Second)
	for _, lim := range []struct {
		env  string
		make func(l *queue.Limiter, n int) (queue.Middleware, error)
	}{
		{"WORKER_RATE", func(l *queue.Limiter, n int) (queue.Middleware, error) {
			return l.Rate(queue.KeyByName, n, time.Second)
		}},
		{"WORKER_CONCURRENCY_LIMIT", func(l *queue.Limiter, n int) (queue.Middleware, error) {
			return l.Concurrency(queue.KeyByName, n, 10*time.Second, 20*time.Millisecond)
		}},
	} {
		v := os.Getenv(lim.env)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %w", lim.env, err)
		}
		l, err := queue.NewLimiter(q, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		mw, err := lim.make(l, n)
		if err != nil {
			return err
		}
		w.Use(mw)
	}
	holdAfter := int64(-1)
	if v := os.Getenv("WORKER_HOLD_AFTER"); v != "" {
		if holdAfter, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("WORKER_HOLD_AFTER: %w", err)
		}
	}
	var started atomic.Int64
	queue.Handle(w, func(ctx context.Context, _ procJob) error {
		j, _ := queue.JobFromContext(ctx)
		if holdAfter >= 0 && started.Add(1) > holdAfter {
			if err := appendLine(os.Getenv("WORKER_HOLD_LOG"), "held "+j.ID); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}
		start := time.Now()
		time.Sleep(sleep)
		_, err := fmt.Fprintf(f, "%s %d %d %d\n", j.ID, start.UnixNano(), time.Now().UnixNano(), j.Attempts)
		return err
	})
	logDone := func(key string, start time.Time, attempt int) error {
		_, err := fmt.Fprintf(f, "%s %d %d %d\n", key, start.UnixNano(), time.Now().UnixNano(), attempt)
		return err
	}
	holdStep, _ := strconv.Atoi(os.Getenv("WORKER_HOLD_STEP"))
	killStep := 0
	if v := os.Getenv("WORKER_KILL_AFTER_STEP"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("WORKER_KILL_AFTER_STEP: %w", err)
		}
		killStep = n
	}
	queue.Handle(w, func(ctx context.Context, s wfStep) error {
		j, _ := queue.JobFromContext(ctx)
		if killStep > 0 && s.N > killStep {
			// The observer's SIGKILL after step killStep's ack is on its
			// way; the next step, stored with that ack, can reach a
			// handler here first (a loaded machine delays the observer),
			// and must not complete in this process.
			<-ctx.Done()
			return ctx.Err()
		}
		if s.N == holdStep {
			if err := appendLine(os.Getenv("WORKER_HOLD_LOG"), "held "+j.ID); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}
		return logDone(fmt.Sprintf("step-%d", s.N), time.Now(), j.Attempts)
	})
	killItems, _ := strconv.ParseInt(os.Getenv("WORKER_KILL_AFTER_ITEMS"), 10, 64)
	killAtAck := os.Getenv("WORKER_KILL_AT") == "ack"
	var items, itemsAcked atomic.Int64
	queue.Handle(w, func(ctx context.Context, it wfItem) error {
		j, _ := queue.JobFromContext(ctx)
		if err := logDone(fmt.Sprintf("item-%d", it.N), time.Now(), j.Attempts); err != nil {
			return err
		}
		if killItems > 0 && !killAtAck && items.Add(1) == killItems {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return nil
	})
	if killItems > 0 && killAtAck {
		w.Observer(queue.ObserverFunc(func(e queue.Event) {
			if e.Kind == queue.EventDone && e.Job.Name == "wfItem" && itemsAcked.Add(1) == killItems {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
	queue.Handle(w, func(ctx context.Context, _ wfCallback) error {
		j, _ := queue.JobFromContext(ctx)
		return logDone("cb-"+j.Meta[queue.MetaBatchEvent], time.Now(), j.Attempts)
	})
	killNodes, _ := strconv.ParseInt(os.Getenv("WORKER_KILL_AFTER_NODES"), 10, 64)
	var nodes, acked atomic.Int64
	queue.Handle(w, func(ctx context.Context, nd wfNode) error {
		j, _ := queue.JobFromContext(ctx)
		if err := logDone(fmt.Sprintf("node-%d", nd.N), time.Now(), j.Attempts); err != nil {
			return err
		}
		if killNodes > 0 && !killAtAck && nodes.Add(1) == killNodes {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return nil
	})
	if killNodes > 0 && killAtAck {
		w.Observer(queue.ObserverFunc(func(e queue.Event) {
			if e.Kind == queue.EventDone && e.Job.Name == "wfNode" && acked.Add(1) == killNodes {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
	killSets, _ := strconv.ParseInt(os.Getenv("WORKER_KILL_AFTER_SETS"), 10, 64)
	var sets, setsAcked atomic.Int64
	queue.HandleGroup(w, queue.GroupRule{Grace: 100 * time.Millisecond, MaxSize: 5}, func(ctx context.Context, ns []grpNote) error {
		j, _ := queue.JobFromContext(ctx)
		s := testutil.GroupSet{ID: j.ID, Attempt: j.Attempts}
		for _, n := range ns {
			s.Members = append(s.Members, fmt.Sprintf("%s:%d", n.Key, n.N))
		}
		if _, err := fmt.Fprintln(f, s.Line()); err != nil {
			return err
		}
		if killSets > 0 && !killAtAck && sets.Add(1) == killSets {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return nil
	})
	if killSets > 0 && killAtAck {
		w.Observer(queue.ObserverFunc(func(e queue.Event) {
			if e.Kind == queue.EventDone && e.Job.Name == "grpNote" && setsAcked.Add(1) == killSets {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
	if err := handleSeq(w); err != nil {
		return err
	}
	if killStep > 0 {
		w.Observer(queue.ObserverFunc(func(e queue.Event) {
			var s wfStep
			if e.Kind == queue.EventDone && e.Job.Name == "wfStep" && json.Unmarshal(e.Job.Payload, &s) == nil && s.N == killStep {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
	return w.Run(ctx)
}

// appendLine appends line and a newline to the file at path.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

// handleSeq registers the handler of sequence members (seqNote) on w.
func handleSeq(w *queue.Worker) error {
	path := os.Getenv("WORKER_SEQ_LOG")
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// One write per mark: with O_APPEND, lines of several processes never
	// interleave, and their order is the order of the writes.
	mark := func(m testutil.SeqMark) error {
		_, err := f.WriteString(m.Line() + "\n")
		return err
	}
	kill, _ := strconv.ParseInt(os.Getenv("WORKER_KILL_AFTER_SEQ"), 10, 64)
	at := os.Getenv("WORKER_KILL_AT")
	var runs, acked atomic.Int64
	queue.Handle(w, func(ctx context.Context, s seqNote) error {
		k := runs.Add(1)
		m := testutil.SeqMark{Member: fmt.Sprintf("%s:%d", s.Key, s.N), Run: fmt.Sprintf("%d.%d", os.Getpid(), k)}
		if err := mark(m); err != nil {
			return err
		}
		if k == kill && at == "" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond) // the run lasts, so a member let through beside it overlaps it
		m.End = true
		if err := mark(m); err != nil {
			return err
		}
		if k == kill && at == "end" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return nil
	})
	if kill > 0 && at == "ack" {
		w.Observer(queue.ObserverFunc(func(e queue.Event) {
			if e.Kind == queue.EventDone && e.Job.Name == "seqNote" && acked.Add(1) == kill {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
	return nil
}
