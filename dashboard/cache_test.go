package dashboard

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestSharedResetDuringRead: a read that started before an action's reset
// must not be cached after it, or the page would show the store as it was
// before the action (the flushed failed jobs, say) for another statsTTL.
func TestSharedResetDuringRead(t *testing.T) {
	tests := []struct {
		name  string
		reset bool
		want  string // what a get after the in-flight read returns
	}{
		{"reset while the read runs: read again", true, "after"},
		{"no reset: the read is shared", false, "before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s shared[string]
			started, release := make(chan struct{}), make(chan struct{})
			done := make(chan string)
			go func() {
				v, _ := s.get(context.Background(), time.Hour, func(context.Context) (string, error) {
					close(started)
					<-release
					return "before", nil
				})
				done <- v
			}()
			<-started
			if tt.reset {
				s.reset()
			}
			close(release)
			if v := <-done; v != "before" {
				t.Fatalf("the read in flight answered its caller %q, want %q", v, "before")
			}
			got, err := s.get(context.Background(), time.Hour, func(context.Context) (string, error) {
				return "after", nil
			})
			if err != nil || got != tt.want {
				t.Fatalf("get after the read = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestSharedResetWhileWaiting: a caller that waits for a read in flight
// when an action resets the cache reads again rather than taking the read
// that began before the action.
func TestSharedResetWhileWaiting(t *testing.T) {
	var s shared[string]
	started, release := make(chan struct{}), make(chan struct{})
	first := make(chan string)
	go func() {
		v, _ := s.get(context.Background(), time.Hour, func(context.Context) (string, error) {
			close(started)
			<-release
			return "before", nil
		})
		first <- v
	}()
	<-started
	s.reset()
	// A caller arriving after the reset does not wait for the old read.
	got, err := s.get(context.Background(), time.Hour, func(context.Context) (string, error) {
		return "after", nil
	})
	if err != nil || got != "after" {
		t.Fatalf("get after reset = %q, %v; want %q", got, err, "after")
	}
	close(release)
	<-first
	// The old read, ending last, did not overwrite the new value.
	got, _ = s.get(context.Background(), time.Hour, func(context.Context) (string, error) {
		return "third read", nil
	})
	if got != "after" {
		t.Fatalf("cached value after the old read ended = %q, want %q", got, "after")
	}
}

// TestSharedReadOutlivesItsCaller: a read whose caller's context is
// cancelled while it runs (a list page that stopped waiting for its tab
// counts) still finishes and is kept for the next caller.
func TestSharedReadOutlivesItsCaller(t *testing.T) {
	var s shared[string]
	ctx, cancel := context.WithCancel(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.get(ctx, time.Minute, func(ctx context.Context) (string, error) {
			close(started)
			<-release
			return "read", ctx.Err()
		})
		done <- err
	}()
	<-started
	cancel()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the read saw its caller's cancellation: %v", err)
	}
	got, err := s.get(context.Background(), time.Minute, func(context.Context) (string, error) { return "", errors.New("read again") })
	if err != nil || got != "read" {
		t.Fatalf("get after the caller left = %q, %v; want the kept read", got, err)
	}
}

// TestSharedRecent: getRecent answers at once with a value past its ttl
// but within maxAge while one read refreshes it in the background; after a
// reset, or past maxAge, the caller waits for the read.
func TestSharedRecent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl, maxAge = 2 * time.Second, 15 * time.Second
		var s shared[int]
		reads := 0
		release := make(chan struct{})
		fetch := func(context.Context) (int, error) {
			reads++
			if reads > 1 {
				<-release // a slow store
			}
			return reads, nil
		}
		ctx := context.Background()
		get := func(want int, wantWait bool) {
			t.Helper()
			start := time.Now()
			got, err := s.getRecent(ctx, ttl, maxAge, fetch)
			if err != nil || got != want {
				t.Fatalf("getRecent = %d, %v; want %d", got, err, want)
			}
			if waited := time.Since(start) > 0; waited != wantWait {
				t.Fatalf("getRecent waited %v, want a wait %v", time.Since(start), wantWait)
			}
		}
		get(1, false) // the first read
		time.Sleep(ttl)
		get(1, false) // past ttl: the last value at once, a refresh started
		get(1, false) // one refresh at a time: still the last value
		synctest.Wait()
		if reads != 2 {
			t.Fatalf("%d reads, want 2: one refresh for both callers", reads)
		}
		close(release) // the store answers
		synctest.Wait()
		get(2, false) // the refreshed value

		// After a reset (an action), the caller waits for a read.
		s.reset()
		release = make(chan struct{})
		time.AfterFunc(time.Second, func() { close(release) }) // the store answers a second later
		get(3, true)

		// Past maxAge the last value is too old to show: wait again.
		time.Sleep(maxAge)
		release = make(chan struct{})
		time.AfterFunc(time.Second, func() { close(release) })
		get(4, true)
	})
}
