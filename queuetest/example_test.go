package queuetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queuetest"
)

type Welcome struct{ User string }

// signup is the code under test: it dispatches a welcome email.
func signup(ctx context.Context, p queue.Pusher, user string) error {
	return queue.Dispatch(ctx, p, Welcome{User: user}, queue.OnQueue("emails"), queue.Delay(time.Minute))
}

func ExampleAssertDispatched() {
	fake := queuetest.NewFake()
	_ = signup(context.Background(), fake, "ada")

	t := &printTB{}
	ok := queuetest.AssertDispatched(t, fake, func(w Welcome) bool { return w.User == "ada" },
		queuetest.OnQueue("emails"), queuetest.Delayed(time.Minute))
	fmt.Println("dispatched:", ok)
	queuetest.AssertDispatched[Welcome](t, fake, nil, queuetest.OnQueue("default"))
	// Output:
	// dispatched: true
	// queuetest: no Welcome, on queue default was dispatched; dispatched instead (1):
	// 	Welcome on queue emails: {"User":"ada"} delayed 1m0s
}

func ExampleWork() {
	w := queue.NewWorker(nil)
	queue.Handle(w, func(ctx context.Context, v Welcome) error {
		fmt.Println("welcoming", v.User)
		return nil
	})
	err := queuetest.Work(context.Background(), w, Welcome{User: "ada"})
	fmt.Println("error:", err)
	// Output:
	// welcoming ada
	// error: <nil>
}
