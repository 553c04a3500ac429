package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf and Skipf, then ends its
// goroutine as testing's do, so the helpers' failure paths can be checked.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f(r) on a goroutine of its own and waits for it to end.
func run(r *recorder, f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

func TestDSN(t *testing.T) {
	const env = "MERIDIAN_TESTUTIL_PROBE"
	Examples[env] = "probe://example"
	t.Cleanup(func() { delete(Examples, env); delete(skipped, env) })

	t.Setenv(env, "probe://set")
	if got := DSN(&recorder{TB: t}, env); got != "probe://set" {
		t.Errorf("DSN with the variable set = %q", got)
	}

	t.Setenv(env, "")
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	run(r, func(tb testing.TB) { DSN(tb, env) })
	if !strings.Contains(r.skip, env) || r.fatal != "" {
		t.Errorf("unset outside CI: skip %q, fatal %q; want a skip naming %s", r.skip, r.fatal, env)
	}
	var out strings.Builder
	summary(&out)
	if !strings.Contains(out.String(), "1 server test(s) skipped: "+env+" is not set") {
		t.Errorf("summary = %q; want the skip counted", out.String())
	}

	t.Setenv("CI", "true")
	r = &recorder{TB: t}
	run(r, func(tb testing.TB) { DSN(tb, env) })
	if !strings.Contains(r.fatal, env) || r.skip != "" {
		t.Errorf("unset under CI: skip %q, fatal %q; want a failure naming %s", r.skip, r.fatal, env)
	}
}

func TestName(t *testing.T) {
	a, b := Name("t_"), Name("t_")
	if a == b || !strings.HasPrefix(a, "t_") || len(a) != len("t_")+12 {
		t.Errorf("Name gave %q and %q; want distinct t_ + 12 hex digits", a, b)
	}
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, time.Second, func() bool { n++; return n == 3 }, "never three")
	if n != 3 {
		t.Errorf("cond checked %d times; want until it held (3)", n)
	}

	r := &recorder{TB: t}
	run(r, func(tb testing.TB) {
		Eventually(tb, 0, func() bool { return false }, "job %s never ran", "j1")
	})
	if !strings.Contains(r.fatal, "job j1 never ran") {
		t.Errorf("failure message = %q", r.fatal)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	if !WaitFor(time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("WaitFor checked cond %d times; want true after 3", n)
	}
	start := time.Now()
	if WaitFor(20*time.Millisecond, func() bool { return false }) {
		t.Error("WaitFor of a cond that never holds = true")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("WaitFor gave up after %v, before its timeout", d)
	}
}
