// Package queuetest helps users test code that dispatches and handles
// Meridian jobs, in the spirit of Laravel's Queue::fake() and River's
// rivertest.
//
// # Faking the queue
//
// Fake is a recording queue.Pusher: give it to the code under test in
// place of the real queue (or transaction) and assert on what was pushed:
//
//	fake := queuetest.NewFake()
//	signup(ctx, fake, "ada@example.com")
//	queuetest.AssertDispatched(t, fake, func(e SendEmail) bool { return e.To == "ada@example.com" },
//		queuetest.OnQueue("emails"), queuetest.Delayed(time.Minute))
//	queuetest.AssertNotDispatched[ChargeCard](t, fake, nil)
//
// A nil match accepts every job of the type; the checks (OnQueue, Delayed,
// At, WithPriority, WithUnique, WithMaxAttempts, WithTimeout, Tagged,
// WithMeta, Matching) narrow it further. A failing assertion reports what
// was dispatched instead.
//
// # Against a real queue
//
// RequireInserted finds a ready or scheduled job of a type in a real
// queue (memqueue or a SQL driver) through its inspection interface, for
// tests that dispatch inside a database transaction.
//
// # Running a handler
//
// Work runs the handler registered on a Worker for a value, synchronously,
// with the worker's middleware, and returns its error: no queue, no retry.
package queuetest
