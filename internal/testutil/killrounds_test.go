package testutil

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records and ends the
// goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestKillRounds runs rounds of processes that kill themselves until
// finished holds, counting the kills, and stops a round whose processes
// never end at the deadline, killing them.
func TestKillRounds(t *testing.T) {
	t.Parallel()
	rounds := 0
	kills := KillRounds(t, time.Minute, func() bool { return rounds == 2 }, func() []*exec.Cmd {
		rounds++
		var procs []*exec.Cmd
		for range 2 {
			c := exec.Command("sh", "-c", "kill -KILL $$")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			procs = append(procs, c)
		}
		return procs
	})
	if rounds != 2 || kills != 4 {
		t.Errorf("%d rounds and %d kills, want 2 and 4", rounds, kills)
	}

	r := &fatalRecorder{TB: t}
	var hung *exec.Cmd
	done := make(chan struct{})
	go func() {
		defer close(done)
		KillRounds(r, time.Second, func() bool { return false }, func() []*exec.Cmd {
			hung = exec.Command("sleep", "600")
			if err := hung.Start(); err != nil {
				t.Error(err)
				return nil
			}
			return []*exec.Cmd{hung}
		})
	}()
	<-done
	if !strings.Contains(r.fatal, "not all handled within 1s") {
		t.Errorf("Fatalf(%q), want the deadline's", r.fatal)
	}
	if hung == nil || hung.ProcessState == nil {
		t.Errorf("the hung process was not reaped")
	}
}
