package memqueue_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// modelJob is the reference model's view of one job.
type modelJob struct {
	id       string
	priority int
	avail    time.Time
	seq      int
	running  bool
	expires  time.Time
	lease    driver.Lease
}

// TestOrderMatchesModel drives a queue with random pushes (more distinct
// priorities than the queue keeps lanes for, past and future availability),
// reservations, nacks, acks, lease expiries and clock steps, and checks
// every reservation against a reference that sorts the ready jobs by
// priority, AvailableAt and insertion.
func TestOrderMatchesModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			c := newClock()
			q := memqueue.New(memqueue.WithClock(c.now))
			model := map[string]*modelJob{}
			seq := 0
			for step := range 1500 {
				now := c.now()
				switch op := rng.IntN(10); {
				case op < 4: // push
					seq++
					m := &modelJob{id: fmt.Sprintf("j%d", seq), priority: rng.IntN(21) - 10, seq: seq}
					offset := time.Duration(rng.IntN(2000)-1000) * time.Millisecond
					if rng.IntN(2) == 0 {
						offset = 0
					}
					m.avail = now.Add(offset)
					mustPush(t, q, queue.Job{ID: m.id, Priority: m.priority, AvailableAt: m.avail})
					model[m.id] = m
				case op < 7: // reserve and check the order
					max := 1 + rng.IntN(5)
					var ready []*modelJob
					for _, m := range model {
						if (!m.running && !m.avail.After(now)) || (m.running && !m.expires.After(now)) {
							ready = append(ready, m)
						}
					}
					slices.SortFunc(ready, func(a, b *modelJob) int {
						if a.priority != b.priority {
							return cmp.Compare(b.priority, a.priority)
						}
						if c := a.avail.Compare(b.avail); c != 0 {
							return c
						}
						return cmp.Compare(a.seq, b.seq)
					})
					want := ready[:min(max, len(ready))]
					got := mustReserve(t, q, queue.DefaultQueue, max, time.Duration(200+rng.IntN(800))*time.Millisecond)
					if len(got) != len(want) {
						t.Fatalf("step %d: reserved %d jobs, want %d", step, len(got), len(want))
					}
					for i, j := range got {
						if j.ID != want[i].id {
							t.Fatalf("step %d: reservation %d is %s, want %s", step, i, j.ID, want[i].id)
						}
						m := model[j.ID]
						m.running, m.expires, m.lease = true, j.LeaseExpiresAt, j.Lease()
					}
				case op < 9: // finish a running job: nack or ack
					for _, m := range model {
						if !m.running || !m.expires.After(now) {
							continue
						}
						if rng.IntN(2) == 0 {
							if err := testutil.Ack(t.Context(), q, m.lease); err != nil {
								t.Fatalf("step %d: Ack: %v", step, err)
							}
							delete(model, m.id)
							break
						}
						retry := now.Add(time.Duration(rng.IntN(1500)-500) * time.Millisecond)
						if err := testutil.Nack(t.Context(), q, m.lease, retry, "x"); err != nil {
							t.Fatalf("step %d: Nack: %v", step, err)
						}
						m.running = false
						m.avail = retry
						if retry.Before(now) {
							m.avail = now
						}
						break
					}
				default:
					c.advance(time.Duration(rng.IntN(400)) * time.Millisecond)
				}
				// Expired leases are ready again, keeping their AvailableAt.
				for _, m := range model {
					if m.running && !m.expires.After(c.now()) {
						m.running = false
					}
				}
			}
		})
	}
}
