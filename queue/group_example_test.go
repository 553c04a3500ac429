package queue_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

// NotifyUser is one notification; HandleGroup turns a user's many into one
// digest.
type NotifyUser struct {
	UserID int
	Text   string
}

func ExampleHandleGroup() {
	ctx := context.Background()
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	// A user's notifications wait until none came for a minute, at most
	// ten minutes, or until there are three.
	rule := queue.GroupRule{Grace: time.Minute, MaxDelay: 10 * time.Minute, MaxSize: 3}
	queue.HandleGroup(w, rule, func(ctx context.Context, ns []NotifyUser) error {
		texts := make([]string, len(ns))
		for i, n := range ns {
			texts[i] = n.Text
		}
		fmt.Printf("digest for user %d: %s\n", ns[0].UserID, strings.Join(texts, ", "))
		close(done)
		return nil
	})
	for _, text := range []string{"new follower", "new comment", "new like"} {
		if err := queue.Dispatch(ctx, q, NotifyUser{UserID: 42, Text: text}, queue.Group("user-42")); err != nil {
			fmt.Println(err)
			return
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	<-done
	stop()
	<-ran
	// Output: digest for user 42: new follower, new comment, new like
}
