package contracttest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// testFleet checks the fleet's commands to workers (driver.Fleet): the
// terminations count, a worker's own terminate, pauses of the fleet and of
// one worker, and that continuing the fleet continues every worker.
func (s *suite) testFleet(t *testing.T) {
	checkAs(s, t, "Orders", func(t *testing.T, q queue.Queue, f driver.Fleet) {
		ctx := t.Context()
		orders := func(id string) driver.WorkerOrders {
			t.Helper()
			o, err := f.WorkerOrders(ctx, id)
			if err != nil {
				t.Fatalf("WorkerOrders(%s): %v", id, err)
			}
			return o
		}
		command := func(id string, cmd driver.WorkerCommand) {
			t.Helper()
			if err := f.CommandWorkers(ctx, id, cmd); err != nil {
				t.Fatalf("CommandWorkers(%q, %s): %v", id, cmd, err)
			}
		}
		if o := orders("w1"); o != (driver.WorkerOrders{}) {
			t.Fatalf("orders of a new store = %+v, want none", o)
		}
		command("", driver.CommandTerminate)
		command("", driver.CommandTerminate)
		if o := orders("w1"); o.Terminations != 2 || o.Terminate || o.Paused {
			t.Fatalf("after two fleet terminates: %+v, want Terminations 2 only", o)
		}
		command("w2", driver.CommandTerminate)
		if o := orders("w2"); o.Terminations != 2 || !o.Terminate {
			t.Fatalf("after terminating w2: its orders %+v, want Terminate and Terminations 2", o)
		}
		if o := orders("w1"); o.Terminate {
			t.Fatalf("after terminating w2: w1's orders %+v, want no Terminate", o)
		}

		command("w1", driver.CommandPause)
		command("w3", driver.CommandPause)
		if !orders("w1").Paused || orders("w2").Paused {
			t.Fatalf("after pausing w1: w1 %+v, w2 %+v; want only w1 paused", orders("w1"), orders("w2"))
		}
		fleet, ids, err := f.PausedWorkers(ctx)
		if err != nil || fleet || !slices.Equal(ids, []string{"w1", "w3"}) {
			t.Fatalf("PausedWorkers() = %v, %v, %v; want false, [w1 w3]", fleet, ids, err)
		}
		command("w1", driver.CommandContinue)
		if orders("w1").Paused {
			t.Fatal("w1 still paused after its continue")
		}
		command("", driver.CommandPause)
		if !orders("w2").Paused || !orders("w9").Paused {
			t.Fatal("a fleet pause does not pause every worker")
		}
		if fleet, _, _ := f.PausedWorkers(ctx); !fleet {
			t.Fatal("PausedWorkers does not report the fleet's pause")
		}
		command("", driver.CommandContinue)
		if orders("w2").Paused || orders("w3").Paused {
			t.Fatal("a fleet continue leaves workers paused")
		}
		if fleet, ids, _ := f.PausedWorkers(ctx); fleet || len(ids) != 0 {
			t.Fatalf("PausedWorkers() after the fleet's continue = %v, %v; want none", fleet, ids)
		}
		if o := orders("w2"); o.Terminations != 2 || !o.Terminate {
			t.Fatalf("pauses changed the terminations: %+v", o)
		}
		if err := f.CommandWorkers(ctx, "w1", "reboot"); !errors.Is(err, queue.ErrInvalid) {
			t.Fatalf("CommandWorkers(reboot) = %v, want ErrInvalid", err)
		}
		if rep := driver.CapabilitiesOf(q).Reporter; rep != nil {
			if err := rep.Deregister(ctx, "w2"); err != nil {
				t.Fatalf("Deregister: %v", err)
			}
			if o := orders("w2"); o.Terminate {
				t.Fatalf("w2's terminate outlived its Deregister: %+v", o)
			}
		}
	})

	checkAs(s, t, "Cancelled", func(t *testing.T, q queue.Queue, f driver.Fleet) {
		ctx := cancelled(t)
		wantErr(t, "CommandWorkers with a cancelled context", f.CommandWorkers(ctx, "", driver.CommandPause), context.Canceled)
		_, err := f.WorkerOrders(ctx, "w1")
		wantErr(t, "WorkerOrders with a cancelled context", err, context.Canceled)
		if o, err := f.WorkerOrders(t.Context(), "w1"); err != nil || o.Paused {
			t.Fatalf("WorkerOrders = %+v, %v after a cancelled pause; want not paused", o, err)
		}
	})
}
