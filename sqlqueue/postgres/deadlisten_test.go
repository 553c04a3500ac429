package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// stallProxy forwards TCP connections on loopback to a target. Stall makes
// it keep accepting and reading while passing no bytes on, as a stuck
// middlebox does: the client's TCP stack sees its data acknowledged, so
// only an application round trip can tell the connection is dead.
type stallProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	gate  chan struct{} // closed while forwarding
	conns []net.Conn
}

func startStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &stallProxy{ln: ln, target: target, gate: make(chan struct{})}
	close(p.gate)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

func (p *stallProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

// pipe copies from src to dst, holding every chunk while the proxy stalls.
func (p *stallProxy) pipe(src, dst net.Conn) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Stall stops forwarding; Resume forwards again, held bytes first.
func (p *stallProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
}

func (p *stallProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// A LISTEN connection that stays open but passes no bytes is reported by
// Health within 2 x ListenCheck (the self-notification round trip), and
// the listener is healthy again, and wakes waiters, once bytes flow.
func TestListenerDetectsSilentConnection(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parsing MERIDIAN_POSTGRES_DSN: %v", err)
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Skipf("MERIDIAN_POSTGRES_DSN is not a URL; the proxy test needs one to point the listener at the proxy")
	}
	proxy := startStallProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	u.Host = proxy.ln.Addr().String()

	const check = 200 * time.Millisecond
	q, err := postgres.NewWithConfig(t.Context(), newPool(t, dsn), postgres.Config{
		ListenDSN:   u.String(),
		ListenCheck: check,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, sqlqueue.WithTable(randomTable()))
	if err != nil {
		t.Fatalf("NewWithConfig through the proxy: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if err := q.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.DropTables(context.Background()) })
	if err := q.Health(); err != nil {
		t.Fatalf("Health after New = %v, want nil", err)
	}

	proxy.Stall()
	stalled := time.Now()
	down := awaitHealth(t, q, "an error", func(err error) bool { return err != nil })
	if !errors.Is(down, postgres.ErrUnresponsive) {
		t.Fatalf("Health with a silent connection = %v, want an error matching the unresponsive-connection error", down)
	}
	t.Logf("silent connection reported after %v (ListenCheck %v): %v", time.Since(stalled), check, down)

	proxy.Resume()
	awaitHealth(t, q, "nil", func(err error) bool { return err == nil })
	done := waitAsync(t.Context(), q, []string{"after"}, safetyPoll)
	if err := queue.Dispatch(t.Context(), q, struct{}{}, queue.OnQueue("after")); err != nil {
		t.Fatal(err)
	}
	woken(t, done, "a push after the listener recovered")
}
