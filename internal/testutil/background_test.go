package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// errorsRecorder is a testing.TB that records Errorf and whether the test
// was stopped, with cleanups run by the test itself.
type errorsRecorder struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	stopped  bool
	cleanups []func()
}

func (r *errorsRecorder) Helper() {}
func (r *errorsRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *errorsRecorder) FailNow()         { r.stopped = true; runtime.Goexit() }
func (r *errorsRecorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// TestBackground runs a helper that fails on its own goroutine: the failure
// is reported, ends that goroutine alone, and wait stops the test; a helper
// that returns stops nothing.
func TestBackground(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		f        func(t testing.TB)
		wantErrs []string
	}{
		{"returns", func(t testing.TB) {}, nil},
		{"fatalf", func(t testing.TB) { t.Fatalf("server %s did not come up", "p"); panic("not reached") }, []string{"server p did not come up"}},
		{"fatal", func(t testing.TB) { t.Fatal("gone"); panic("not reached") }, []string{"gone"}},
		{"skip", func(t testing.TB) { t.Skip("no server"); panic("not reached") }, []string{"skipped on a background goroutine: no server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &errorsRecorder{}
			release := make(chan struct{})
			done, wait := Background(r, func(tb testing.TB) {
				<-release
				tc.f(tb)
			})
			if done() {
				t.Fatal("done before the helper ran")
			}
			close(release)
			var wg sync.WaitGroup
			wg.Go(wait) // wait ends with FailNow's Goexit when the helper failed
			wg.Wait()
			if !done() {
				t.Error("not done after wait")
			}
			if got := strings.Join(r.errs, "|"); got != strings.Join(tc.wantErrs, "|") {
				t.Errorf("errors %q, want %q", got, tc.wantErrs)
			}
			if r.stopped != (tc.wantErrs != nil) {
				t.Errorf("stopped %v, want %v", r.stopped, tc.wantErrs != nil)
			}
			for _, c := range r.cleanups {
				c() // waits for nothing more: the helper has returned
			}
		})
	}
}
