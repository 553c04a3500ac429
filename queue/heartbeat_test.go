package queue

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue/driver"
)

func TestHeldLeasesCountByQueue(t *testing.T) {
	t.Parallel()
	type want struct{ running, reserved map[string]int }
	s := newHeldLeases()
	check := func(step string, w want) {
		t.Helper()
		running, reserved := s.counts()
		if !maps.Equal(running, w.running) || !maps.Equal(reserved, w.reserved) {
			t.Fatalf("after %s: counts() = %v, %v; want %v, %v", step, running, reserved, w.running, w.reserved)
		}
	}
	check("nothing", want{})
	a, b, c := job("a"), job("b"), job("c")
	a.Queue, b.Queue, c.Queue = "q1", "q1", "q2"
	s.addAll([]*Job{a, b, c}, time.Minute)
	check("reserving three", want{nil, map[string]int{"q1": 2, "q2": 1}})
	ha, _ := s.run(a, nil, context.Background(), time.Now())
	hc, _ := s.run(c, nil, context.Background(), time.Now())
	check("starting a and c", want{map[string]int{"q1": 1, "q2": 1}, map[string]int{"q1": 1}})
	s.stop(ha, 0)
	check("a's handler returning", want{map[string]int{"q2": 1}, map[string]int{"q1": 2}})
	s.remove(a.Lease())
	s.remove(a.Lease()) // twice: counted once
	check("acking a", want{map[string]int{"q2": 1}, map[string]int{"q1": 1}})
	if got := s.releaseRunning(); len(got) != 1 || got[0].JobID != "c" {
		t.Fatalf("releaseRunning() = %v, want c's lease", got)
	}
	s.stop(hc, 0) // its handler returns after the release: not uncounted twice
	check("releasing c", want{nil, map[string]int{"q1": 1}})
	s.add(b, time.Minute) // held again (a new reservation of the same job)
	check("holding b again", want{nil, map[string]int{"q1": 1}})
	s.remove(b.Lease())
	check("acking b", want{})
}

// TestHeartbeatReportsHeldJobsEarly: the heartbeat carries the jobs held,
// is sent within about a second (earlyBeat) of them changing, going idle
// included, at most once per earlyBeat while they keep changing, and once
// per interval when nothing changes.
func TestHeartbeatReportsHeldJobsEarly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sq := &stubQueue{t: t}
		held := newHeldLeases()
		const every = 10 * time.Second
		h := &heartbeat{reg: sq, info: driver.WorkerInfo{ID: "w1"}, every: every, held: held.counts,
			ctx: context.Background(), halt: &halt{stop: func() {}}, log: quietLog}
		start := time.Now()
		done := make(chan struct{})
		finished := make(chan struct{})
		go func() { h.run(done); close(finished) }()
		beatsSince := func(from time.Time) []sentBeat {
			synctest.Wait()
			sq.mu.Lock()
			defer sq.mu.Unlock()
			var out []sentBeat
			for _, b := range sq.sent {
				if !b.at.Before(from) {
					out = append(out, b)
				}
			}
			return out
		}
		wantGaps := func(what string, bs []sentBeat, gap time.Duration) {
			t.Helper()
			for i := 1; i < len(bs); i++ {
				if d := bs[i].at.Sub(bs[i-1].at); d < gap {
					t.Errorf("%s: beats %s apart (at %s and %s), want at least %s", what, d, bs[i-1].at.Sub(start), bs[i].at.Sub(start), gap)
				}
			}
		}

		// Quiet: one beat at the start, then one per interval.
		time.Sleep(25 * time.Second)
		quiet := beatsSince(start)
		if len(quiet) != 3 {
			t.Fatalf("%d beats in 25 s of quiet, want 3 (at 0, 10 and 20 s)", len(quiet))
		}
		wantGaps("quiet", quiet, every)

		// Jobs arrive: reported within earlyBeat (plus the tick it waits for).
		time.Sleep(300 * time.Millisecond)
		changed := time.Now()
		a, b := job("a"), job("b")
		a.Queue, b.Queue = "emails", "emails"
		held.addAll([]*Job{a, b}, time.Minute)
		held.run(a, nil, context.Background(), time.Now())
		var got []sentBeat
		if !testutil.WaitFor(2*earlyBeat, func() bool { got = beatsSince(changed); return len(got) > 0 }) {
			t.Fatalf("no beat within %s of the held jobs changing", 2*earlyBeat)
		}
		if d := got[0].at.Sub(changed); d > earlyBeat {
			t.Errorf("first beat %s after the held jobs changed, want within %s", d, earlyBeat)
		}
		if r, res := got[0].info.Running, got[0].info.Reserved; !maps.Equal(r, map[string]int{"emails": 1}) || !maps.Equal(res, map[string]int{"emails": 1}) {
			t.Errorf("beat reported Running %v, Reserved %v; want emails: 1 and 1", r, res)
		}

		// Busy: the held jobs change every 100 ms for 5 s: at most one beat per earlyBeat.
		busy := time.Now()
		for i := range 50 {
			j := job("busy" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
			j.Queue = "emails"
			held.add(j, time.Minute)
			time.Sleep(100 * time.Millisecond)
		}
		bs := beatsSince(busy)
		if len(bs) < 4 || len(bs) > 6 {
			t.Errorf("%d beats in 5 s of changes, want about one per %s", len(bs), earlyBeat)
		}
		wantGaps("busy", bs, earlyBeat)

		// Going idle is reported early too, with no jobs held.
		for _, id := range []string{"a", "b"} {
			held.remove(job(id).Lease())
		}
		for i := range 50 {
			held.remove(job("busy" + string(rune('a'+i%26)) + string(rune('a'+i/26))).Lease())
		}
		idle := time.Now()
		testutil.WaitFor(earlyBeat, func() bool { got = beatsSince(idle); return len(got) > 0 })
		if len(got) != 1 || got[0].info.Running != nil || got[0].info.Reserved != nil {
			t.Fatalf("beats after going idle: %+v; want one, within %s, reporting no jobs", got, earlyBeat)
		}

		// Quiet again: once per interval.
		time.Sleep(35 * time.Second)
		quiet = beatsSince(idle)
		if len(quiet) != 4 {
			t.Errorf("%d beats in the 36 s after going idle, want 4 (idle, then every %s)", len(quiet), every)
		}
		wantGaps("quiet after idle", quiet, every)
		close(done)
		<-finished
	})
}

var quietLog = slog.New(slog.DiscardHandler)
