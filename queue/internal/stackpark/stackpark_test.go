package stackpark

import (
	"runtime"
	"testing"
	"testing/synctest"
	"unsafe"
)

// TestReceiveKeepsTheStack parks goroutines whose stacks their work grew
// to 16 KB, collects garbage twice, and asks each whether its stack moved
// (a shrink copies it): waiting with a plain receive, the collector
// shrinks them; waiting in Receive, it keeps them.
func TestReceiveKeepsTheStack(t *testing.T) {
	const n = 50
	for _, tc := range []struct {
		name      string
		recv      func(<-chan struct{}) (struct{}, bool)
		wantMoved bool
	}{
		{"plain receive", func(ch <-chan struct{}) (struct{}, bool) { v, ok := <-ch; return v, ok }, true},
		{"Receive", Receive[struct{}], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ch := make(chan struct{})
				moved := make(chan bool, n)
				for range n {
					go func() {
						grow(12 << 10)
						var mark byte
						before := uintptr(unsafe.Pointer(&mark))
						tc.recv(ch)
						moved <- uintptr(unsafe.Pointer(&mark)) != before
					}()
				}
				synctest.Wait() // every goroutine waits in recv
				runtime.GC()
				runtime.GC()
				close(ch)
				count := 0
				for range n {
					if <-moved {
						count++
					}
				}
				if tc.wantMoved && count < n/2 {
					t.Fatalf("%d of %d stacks moved after two collections; want most shrunk (the runtime's shrink rule changed?)", count, n)
				}
				if !tc.wantMoved && count > 0 {
					t.Fatalf("%d of %d stacks moved after two collections; want none", count, n)
				}
			})
		})
	}
}

// grow uses about n bytes of stack, so that the goroutine's stack grows to
// hold them, and returns.
//
//go:noinline
func grow(n int) byte {
	var frame [512]byte
	hold512(&frame)
	if n <= len(frame) {
		return frame[0]
	}
	return grow(n-len(frame)) + frame[1]
}

//go:noinline
func hold512(*[512]byte) {}

// BenchmarkReceive measures what Receive adds to a receive that finds a
// value waiting: clearing its frame.
func BenchmarkReceive(b *testing.B) {
	ch := make(chan int, 1)
	b.Run("plain receive", func(b *testing.B) {
		for b.Loop() {
			ch <- 1
			<-ch
		}
	})
	b.Run("Receive", func(b *testing.B) {
		for b.Loop() {
			ch <- 1
			Receive(ch)
		}
	})
}
