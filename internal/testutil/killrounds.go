package testutil

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Feed runs push(ctx, i) for i from 0 to n-1 in the background, three
// pushes every 5 ms, so that the worker processes of a process test run
// while the jobs arrive. The returned fed reports, without waiting,
// whether every push has returned; it fails t (so call it from the
// test's goroutine) when one failed.
func Feed(t testing.TB, n int, push func(ctx context.Context, i int) error) (fed func() bool) {
	t.Helper()
	pushed := make(chan error, 1)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := range n {
			if i%3 == 0 {
				<-tick.C
			}
			if err := push(t.Context(), i); err != nil {
				pushed <- err
				return
			}
		}
		pushed <- nil
	}()
	all := false
	return func() bool {
		if !all {
			select {
			case err := <-pushed:
				if err != nil {
					t.Fatalf("dispatching job: %v", err)
				}
				all = true
			default:
			}
		}
		return all
	}
}

// KillRounds runs rounds of worker processes until finished holds: start
// starts one round's processes, which kill themselves with SIGKILL at
// some point of their work, and the round ends when they have all exited;
// once finished holds, the processes still running are sent SIGTERM. It
// returns how many processes died of SIGKILL. The rounds are bounded by
// the work left, not by time: limit only stops work that no longer moves
// (a store that lost jobs, processes that hang), far above what the work
// takes on a loaded machine; it is checked while a round runs too, and
// when it passes the round's processes are killed and t fails.
// finished runs on the test's goroutine, every 200 ms while processes run.
func KillRounds(t testing.TB, limit time.Duration, finished func() bool, start func() []*exec.Cmd) (kills int) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !finished() {
		if time.Now().After(deadline) {
			t.Fatalf("the jobs were not all handled within %v and %d kills", limit, kills)
		}
		procs := start()
		exited := make(chan *exec.Cmd, len(procs))
		for _, p := range procs {
			go func() { _ = p.Wait(); exited <- p }()
		}
		for left := len(procs); left > 0; {
			select {
			case p := <-exited:
				left--
				if ws, ok := p.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
					kills++
				}
			case <-time.After(200 * time.Millisecond):
				if time.Now().After(deadline) {
					// Reaped here, so that no cleanup waits for them beside
					// the goroutines above.
					for _, p := range procs {
						_ = p.Process.Kill()
					}
					for ; left > 0; left-- {
						<-exited
					}
					t.Fatalf("the jobs were not all handled within %v and %d kills", limit, kills)
				}
				if finished() {
					for _, p := range procs {
						_ = p.Process.Signal(syscall.SIGTERM)
					}
				}
			}
		}
	}
	return kills
}
