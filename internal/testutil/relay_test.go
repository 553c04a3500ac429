package testutil

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer listens on loopback and echoes every connection until the
// test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes msg on c and reads it back, failing t unless the echo
// arrives within d.
func roundTrip(t *testing.T, c net.Conn, msg string, d time.Duration) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(d))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo of %q: got %q, %v", msg, got, err)
	}
}

// silent fails t if anything arrives on c within d.
func silent(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	if n, err := c.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a frozen relay = %d bytes, %v; want nothing until the deadline", n, err)
	}
}

func TestRelay(t *testing.T) {
	t.Parallel()
	r := NewRelay(t, echoServer(t))
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "before", 5*time.Second)

	r.Freeze()
	r.Freeze() // twice is once
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatalf("write into a frozen relay: %v; want the socket open", err)
	}
	silent(t, c, 200*time.Millisecond)
	// A connection made while frozen is accepted and carries nothing.
	late, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if _, err := late.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	silent(t, late, 100*time.Millisecond)

	r.Resume()
	r.Resume()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after Resume: got %q, %v; want the held bytes", got, err)
	}
	late.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(late, got); err != nil || string(got) != "late" {
		t.Fatalf("late connection after Resume: got %q, %v", got, err)
	}
	roundTrip(t, c, "after", 5*time.Second)
}

func TestRelayClose(t *testing.T) {
	t.Parallel()
	var r *Relay
	var c net.Conn
	t.Run("owner", func(t *testing.T) {
		r = NewRelay(t, echoServer(t))
		var err error
		if c, err = net.Dial("tcp", r.Addr()); err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c, "x", 5*time.Second)
		r.Freeze() // a frozen relay closes too
	})
	// The owner's cleanup closed the connection and the listener.
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read after the relay closed: %v; want the end of the stream", err)
	}
	// The listener is closed. (Dialing its address is no test of that:
	// once closed, its port is free, and another test's listener may take
	// it; CI saw that.)
	if tl, ok := r.ln.(*net.TCPListener); ok {
		_ = tl.SetDeadline(time.Now().Add(time.Second)) // an open one fails, not hangs
	}
	if c2, err := r.ln.Accept(); !errors.Is(err, net.ErrClosed) {
		if c2 != nil {
			c2.Close()
		}
		t.Errorf("accepting on a closed relay: %v; want net.ErrClosed", err)
	}
}
