package queue_test

// The cookbook's Quick start, Retries and Graceful shutdown code, with only
// the import paths changed and memqueue.New() in place of
// queue.NewMemoryQueue(). These tests keep that code compiling and behaving
// as the cookbook says.

import (
	"context"
	"log"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

type fakeMailer struct {
	mu   sync.Mutex
	sent []uint64
}

func (m *fakeMailer) Send(ctx context.Context, userID uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, userID)
	return nil
}

func (m *fakeMailer) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

func buildEmail(userID uint64) uint64 { return userID }

func TestCookbookQuickStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mailer := &fakeMailer{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		q := memqueue.New()
		w := queue.NewWorker(q)

		queue.Handle[SendWelcomeEmail](w, func(ctx context.Context, j SendWelcomeEmail) error {
			return mailer.Send(ctx, buildEmail(j.UserID))
		})

		go w.Run(ctx) // blocks until ctx is cancelled or Stop() is called

		_ = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 42})

		// Dispatch with a delay.
		_ = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 43}, queue.Delay(10*time.Minute))

		waitFor(t, "the welcome mail", func() bool { return mailer.count() == 1 })
		time.Sleep(50 * time.Millisecond)
		if mailer.count() != 1 {
			t.Fatal("the delayed job ran before its time")
		}
	})
}

func TestCookbookRetries(t *testing.T) {
	q := memqueue.New()
	failed := make(chan queue.Job, 1)

	w := queue.NewWorker(q).
		MaxRetry(5).               // attempts before giving up (then OnFailed)
		Backoff(time.Millisecond). // wait between retries (the cookbook uses 30s)
		Poll(time.Second).         // how long an idle worker waits before it reserves again
		Logger(log.Printf).        // structured-ish logging hook
		OnFailed(func(j queue.Job, err error) {
			log.Printf("dead-letter %s: %v", j.Name, err)
			failed <- j
		})
	var attempts int
	queue.Handle[SendWelcomeEmail](w, func(ctx context.Context, j SendWelcomeEmail) error {
		attempts++
		return context.DeadlineExceeded
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	_ = queue.Dispatch(ctx, q, SendWelcomeEmail{UserID: 1})
	select {
	case j := <-failed:
		if j.Attempts != 5 || attempts != 5 {
			t.Fatalf("OnFailed after %d attempts (handler ran %d times), want 5", j.Attempts, attempts)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnFailed was not called")
	}
}

func TestCookbookGracefulShutdown(t *testing.T) {
	mailer := &fakeMailer{}
	started, stopping := make(chan struct{}), make(chan struct{})
	handleWelcome := func(ctx context.Context, j SendWelcomeEmail) error {
		close(started) // the test's own: the job is in flight
		<-stopping     // and still is when the Worker is asked to stop
		return mailer.Send(ctx, j.UserID)
	}
	q := memqueue.New()
	_ = queue.Dispatch(context.Background(), q, SendWelcomeEmail{UserID: 42})

	ctx, stop := signal.NotifyContext(context.Background(),
		syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	w := queue.NewWorker(q)
	queue.Handle[SendWelcomeEmail](w, handleWelcome)

	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()

	<-started
	stop() // stands in for the first signal, which cancels the context

	<-ctx.Done() // first signal cancels the context
	w.Stop()     // ask the worker to finish the current job and return
	close(stopping)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if mailer.count() != 1 {
		t.Fatalf("the job in flight at shutdown was not finished (sent %d)", mailer.count())
	}
}
