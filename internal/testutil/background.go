package testutil

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Background runs f on a goroutine of its own with a testing.TB made for
// it, so that a helper written for the test's goroutine (one that calls
// Fatalf, as [Server]'s Restart does) can run while the test goes on.
// testing allows FailNow only on the test's goroutine: here a Fatal,
// Fatalf, FailNow or Skip in f reports its message through t.Errorf (safe
// from any goroutine) and ends f's goroutine alone. done reports, without
// waiting, whether f has returned; wait waits for it and then, on the
// test's goroutine, stops the test if f failed. A cleanup waits for f too,
// so it never outlives the test.
func Background(t testing.TB, f func(t testing.TB)) (done func() bool, wait func()) {
	b := &backgroundTB{TB: t}
	var wg sync.WaitGroup
	var finished atomic.Bool
	wg.Go(func() {
		defer finished.Store(true)
		f(b)
	})
	var once sync.Once
	wait = func() {
		once.Do(wg.Wait)
		if b.failed.Load() {
			t.FailNow()
		}
	}
	t.Cleanup(func() { once.Do(wg.Wait) })
	return finished.Load, wait
}

// backgroundTB is Background's testing.TB: the test's own, except that
// what would end the test ends the goroutine.
type backgroundTB struct {
	testing.TB
	failed atomic.Bool
}

func (b *backgroundTB) stop(msg string) {
	b.failed.Store(true)
	b.TB.Errorf("%s", msg)
	runtime.Goexit()
}

func (b *backgroundTB) Fatal(args ...any) { b.stop(fmt.Sprint(args...)) }
func (b *backgroundTB) Fatalf(format string, args ...any) {
	b.stop(fmt.Sprintf(format, args...))
}
func (b *backgroundTB) FailNow() { b.stop("FailNow called on a background goroutine") }
func (b *backgroundTB) Skip(args ...any) {
	b.stop("skipped on a background goroutine: " + fmt.Sprint(args...))
}
func (b *backgroundTB) Skipf(format string, args ...any) {
	b.stop("skipped on a background goroutine: " + fmt.Sprintf(format, args...))
}
func (b *backgroundTB) SkipNow() { b.stop("SkipNow called on a background goroutine") }
