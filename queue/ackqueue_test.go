package queue

import (
	"testing"
	"testing/synctest"
)

// TestAckQueue checks the ack queue's contract: items come out oldest
// first and at most as many as asked; a put waits while the queue is full
// until a flusher takes items, or fails once the queue is closed; a closed
// queue still hands out what it holds, then reports itself closed.
func TestAckQueue(t *testing.T) {
	t.Parallel()
	item := func(id string) ackItem { return ackItem{j: &Job{ID: id}} }
	ids := func(b *ackBatch) (out []string) {
		for _, it := range b.acks {
			out = append(out, it.j.ID)
		}
		return out
	}
	synctest.Test(t, func(t *testing.T) {
		q := newAckQueue(2)
		for _, id := range []string{"a", "b"} {
			if !q.put(item(id)) {
				t.Fatalf("put %s failed on an open queue", id)
			}
		}
		third := make(chan bool)
		go func() { third <- q.put(item("c")) }()
		synctest.Wait()
		select {
		case <-third:
			t.Fatal("put returned while the queue was full")
		default:
		}
		var b ackBatch
		if took, open := q.take(&b, 1); took != 1 || !open || ids(&b)[0] != "a" {
			t.Fatalf("take(1) = %d, %v, %v; want a, open", took, open, ids(&b))
		}
		if !<-third {
			t.Fatal("the waiting put failed after a take made room")
		}
		b.reset()
		if took, open := q.take(&b, 10); took != 2 || !open || ids(&b)[0] != "b" || ids(&b)[1] != "c" {
			t.Fatalf("take(10) = %d, %v, %v; want b and c, open", took, open, ids(&b))
		}

		q.put(item("d"))
		q.put(item("e"))
		blocked := make(chan bool)
		go func() { blocked <- q.put(item("f")) }()
		synctest.Wait()
		q.close()
		if <-blocked {
			t.Fatal("a put waiting for room succeeded after close")
		}
		if q.put(item("g")) {
			t.Fatal("put succeeded on a closed queue")
		}
		b.reset()
		if took, open := q.take(&b, 1); took != 1 || !open {
			t.Fatalf("take on a closed queue holding 2 = %d, %v; want 1, still open", took, open)
		}
		if took, open := q.take(&b, 1); took != 1 || open {
			t.Fatalf("last take = %d, %v; want 1, closed", took, open)
		}
		if got := ids(&b); len(got) != 2 || got[0] != "d" || got[1] != "e" {
			t.Fatalf("took %v from the closed queue, want d and e", got)
		}
	})
}
