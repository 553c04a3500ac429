package testutil

import (
	"errors"
	"net"
	"sync"
	"testing"
)

// Relay is a TCP relay on the loopback interface between the clients that
// connect to [Relay.Addr] and one target address (a database server), owned
// by a test: the fault suite's network that can freeze. While it is frozen
// it forwards no byte in either direction and keeps every socket open, as a
// network that stops carrying packets does: neither side sees an error or
// an end of stream, and a connection made while frozen is accepted but
// carries nothing until [Relay.Resume].
//
// A Relay is safe for concurrent use. Make one with [NewRelay].
type Relay struct {
	target string
	ln     net.Listener
	done   chan struct{} // closed by close

	mu      sync.Mutex
	open    chan struct{} // closed while the relay forwards
	frozen  bool
	closed  bool
	conns   map[net.Conn]struct{}
	pumps   sync.WaitGroup
	closeMu sync.Once
}

// NewRelay starts a relay to target ("127.0.0.1:5432") listening on a free
// loopback port, forwarding, and closes it (and every connection through
// it) when the test ends. It fails the test if it cannot listen.
func NewRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("relay to %s: %v", target, err)
	}
	r := &Relay{
		target: target,
		ln:     ln,
		done:   make(chan struct{}),
		open:   make(chan struct{}),
		conns:  map[net.Conn]struct{}{},
	}
	close(r.open)
	r.pumps.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

// Addr returns the address clients connect to instead of the target
// ("127.0.0.1:41234").
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Freeze stops forwarding bytes in both directions on every connection,
// present and future, until Resume. Bytes a side sends meanwhile wait in
// the kernel's buffers (or in the relay's, for a read already under way),
// and are delivered in order after Resume. Freezing a frozen relay does
// nothing.
func (r *Relay) Freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.frozen {
		r.frozen = true
		r.open = make(chan struct{})
	}
}

// Resume forwards again what Freeze held back, and what follows. Resuming
// a relay that is not frozen does nothing.
func (r *Relay) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		r.frozen = false
		close(r.open)
	}
}

// close stops listening, closes every connection and waits for the
// relay's goroutines to end.
func (r *Relay) close() {
	r.closeMu.Do(func() {
		close(r.done)
		r.ln.Close()
		r.mu.Lock()
		r.closed = true
		for c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.pumps.Wait()
	})
}

// wait blocks while the relay is frozen. It reports false once the relay
// is closed.
func (r *Relay) wait() bool {
	r.mu.Lock()
	open := r.open
	r.mu.Unlock()
	select {
	case <-open:
		return true
	case <-r.done:
		return false
	}
}

// track records c so that close closes it; it reports false (and closes
// c) when the relay is already closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// untrack closes c and forgets it.
func (r *Relay) untrack(c net.Conn) {
	c.Close()
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// accept takes connections until the listener closes, and starts a pair
// of pumps for each.
func (r *Relay) accept() {
	defer r.pumps.Done()
	for {
		client, err := r.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !r.track(client) {
			return
		}
		r.pumps.Add(1)
		go r.serve(client)
	}
}

// serve dials the target for client, then forwards both ways until
// either side ends its stream or the relay closes; then it closes both.
func (r *Relay) serve(client net.Conn) {
	defer r.pumps.Done()
	defer r.untrack(client)
	server, err := net.Dial("tcp", r.target)
	if err != nil || !r.track(server) {
		return
	}
	defer r.untrack(server)
	ended := make(chan struct{}, 2)
	go func() { r.pump(server, client); ended <- struct{}{} }()
	go func() { r.pump(client, server); ended <- struct{}{} }()
	<-ended
	// Closing both ends the other pump's read or write.
	client.Close()
	server.Close()
	<-ended
}

// pump copies src to dst, waiting while the relay is frozen before each
// read and before each write, so that a frozen relay neither takes bytes
// from a socket nor delivers them.
func (r *Relay) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		if !r.wait() {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !r.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
