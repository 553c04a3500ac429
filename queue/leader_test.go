package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// freezable is a memory queue whose lease calls can be frozen: a frozen
// call ignores its context and returns only when thawed, as a call on a
// connection whose peer stopped answering may.
type freezable struct {
	*memqueue.Queue
	mu     sync.Mutex
	frozen chan struct{} // nil: calls go through
}

func (f *freezable) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = make(chan struct{})
}

func (f *freezable) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.frozen)
	f.frozen = nil
}

func (f *freezable) AcquireLeaseEpoch(ctx context.Context, name, holder string, ttl time.Duration) (int64, bool, error) {
	f.mu.Lock()
	frozen := f.frozen
	f.mu.Unlock()
	if frozen != nil {
		<-frozen
	}
	// The call reaches the store after the thaw, as a stuck renewal
	// does on SQLite once the write lock is free.
	return f.Queue.AcquireLeaseEpoch(context.WithoutCancel(ctx), name, holder, ttl)
}

// TestLeaderEndsTermWhileStoreCallHangs: a leader whose renewal hangs ends
// its term at the stored expiry minus the margin, whatever the call is
// doing, and a renewal that goes through late does not resume that term.
func TestLeaderEndsTermWhileStoreCallHangs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const ttl, renew, margin = 9 * time.Second, 3 * time.Second, time.Second
		q := &freezable{Queue: memqueue.New()}
		type termEnd struct {
			epoch int64
			at    time.Time
			cause error
		}
		ends := make(chan termEnd, 4)
		lost := make(chan time.Time, 4)
		var elected time.Time
		l, err := queue.NewLeader(q, "lead", queue.LeaderHolder("a"), queue.LeaderTTL(ttl), queue.LeaderRenew(renew), queue.LeaderMargin(margin),
			queue.LeaderLogger(quiet),
			queue.OnElected(func(ctx context.Context) {
				e, ok := queue.LeaderEpoch(ctx)
				if !ok {
					t.Error("OnElected's context carries no epoch")
				}
				<-ctx.Done()
				ends <- termEnd{e, time.Now(), context.Cause(ctx)}
			}),
			queue.OnLost(func() { lost <- time.Now() }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		synctest.Wait()
		if !l.IsLeader() {
			t.Fatal("the only candidate is not leading")
		}
		elected = time.Now()
		f, _ := l.Fence()
		// Freeze just after a renewal: the last stored expiry is then
		// that renewal's start plus the TTL.
		time.Sleep(renew)
		synctest.Wait()
		renewed := time.Now()
		q.freeze()
		end := <-ends
		if want := renewed.Add(ttl - margin); !end.at.Equal(want) {
			t.Errorf("the term ended at +%s, want +%s (the last renewal's expiry minus the margin)", end.at.Sub(elected), want.Sub(elected))
		}
		if !errors.Is(end.cause, queue.ErrLeadershipLost) || end.epoch != f.Epoch {
			t.Errorf("term end: epoch %d cause %v, want epoch %d and ErrLeadershipLost", end.epoch, end.cause, f.Epoch)
		}
		if at := <-lost; !at.Equal(end.at) {
			t.Errorf("OnLost at +%s, want at the term's end +%s", at.Sub(elected), end.at.Sub(elected))
		}
		if l.IsLeader() {
			t.Error("IsLeader after the term ended")
		}
		// The stuck call goes through after the lease expired: the
		// store holds it for a again, under a new epoch, in a new term.
		time.Sleep(2 * margin)
		q.thaw()
		synctest.Wait()
		testutil.Eventually(t, ttl, l.IsLeader, "a did not lead again after the thaw")
		if g, _ := l.Fence(); g.Epoch <= f.Epoch {
			t.Errorf("the new term's epoch is %d, want above %d", g.Epoch, f.Epoch)
		}
		cancel()
		<-done
	})
}

func TestLeaseNameValidation(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "lead ", "lead\x00", "\xff", string(make([]byte, driver.MaxLeaseNameBytes+1))} {
		if err := driver.ValidateLeaseName(name); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("ValidateLeaseName(%q) = %v, want ErrConfig", name, err)
		}
		if _, err := queue.NewLeader(memqueue.New(), name); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("NewLeader(%q) = %v, want ErrConfig", name, err)
		}
	}
	for _, name := range []string{"lead", " lead", "le ad", "élu"} {
		if err := driver.ValidateLeaseName(name); err != nil {
			t.Errorf("ValidateLeaseName(%q) = %v", name, err)
		}
	}
}

func TestLeaderTimings(t *testing.T) {
	t.Parallel()
	for _, opts := range [][]queue.LeaderOption{
		{queue.LeaderTTL(time.Second), queue.LeaderRenew(time.Second)},
		{queue.LeaderTTL(time.Second), queue.LeaderRenew(600 * time.Millisecond), queue.LeaderMargin(400 * time.Millisecond)},
		{queue.LeaderTTL(0)},
	} {
		if _, err := queue.NewLeader(memqueue.New(), "lead", opts...); !errors.Is(err, queue.ErrConfig) {
			t.Errorf("NewLeader with impossible timings = %v, want ErrConfig", err)
		}
	}
}
