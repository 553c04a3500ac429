package testutil

import (
	"fmt"
	"strings"
	"testing"
)

// SeqMark is one line a sequence member's handler logs in a process
// test: the start (End false) or the end of one run of member Member
// ("key:n": its sequence key and number). Run names the run, unique
// across processes (the process ID and a counter). The handler logs the
// start first thing and the end just before it returns, so a run whose
// process was killed in between has no end, and a run whose process was
// killed after its end but before the ack runs again. The log must keep
// the order in which the lines were written across processes (one file
// opened with O_APPEND, a Redis list): CheckSequences reads that order,
// not clocks.
type SeqMark struct {
	Member string
	Run    string
	End    bool
}

// Line is the log line of m: "seq", the member, the run and "start" or
// "end", four fields.
func (m SeqMark) Line() string {
	mark := "start"
	if m.End {
		mark = "end"
	}
	return fmt.Sprintf("seq %s %s %s", m.Member, m.Run, mark)
}

// ParseSeqMark reads a line Line wrote; ok is false for any other line
// (or one cut short by a SIGKILL).
func ParseSeqMark(line string) (m SeqMark, ok bool) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "seq" || f[3] != "start" && f[3] != "end" {
		return m, false
	}
	return SeqMark{Member: f[1], Run: f[2], End: f[3] == "end"}, true
}

// SeqStats counts what CheckSequences saw.
type SeqStats struct {
	Runs int // every run, ended or not
	// Extra is the runs beyond each member's first: runs again after a
	// kill (before the ack, or between the start and the end).
	Extra int
	// Overlapped is the runs that started while an earlier run of the same
	// member had started and not ended: its holder was killed (or stalled
	// past its lease), and the lease expired.
	Overlapped int
}

// CheckSequences judges the runs of sequence members across processes
// that were killed, from their marks in the order they were written
// (want lists the members in dispatch order, "key:n"):
//
//   - every member ran to its end at least once;
//   - of each key, members first start in dispatch order, and a member
//     first starts only after the end of the last run of the member
//     before it (its successful run: after an ack no run of that member
//     starts again), so none overtakes another;
//   - no run of a key starts while a run of another member of that key
//     has started and not ended. A run of the same member open then
//     (killed, or stalled past its lease: the store let the member run
//     again) is counted in Overlapped and no longer counts as open.
func CheckSequences(t testing.TB, marks []SeqMark, want []string) SeqStats {
	t.Helper()
	var st SeqStats
	faults := 0
	fault := func(format string, args ...any) {
		t.Helper()
		if faults++; faults <= 20 {
			t.Errorf(format, args...)
		}
	}
	defer func() {
		t.Helper()
		if faults > 20 {
			t.Errorf("and %d faults more", faults-20)
		}
	}()
	prev := make(map[string]string, len(want)) // member -> the one dispatched before it in its key
	next := make(map[string]string, len(want))
	known := make(map[string]bool, len(want))
	last := map[string]string{}
	for _, m := range want {
		key, _, _ := strings.Cut(m, ":")
		if p, ok := last[key]; ok {
			prev[m], next[p] = p, m
		}
		last[key] = m
		known[m] = true
	}
	type run struct {
		id, member string
		ended      bool
	}
	runs := map[string]*run{}
	lastRun := map[string]*run{}         // member -> its run that started last
	open := map[string]map[string]*run{} // key -> run ID -> a run started and not ended
	ended := map[string]bool{}
	for i, mk := range marks {
		key, _, _ := strings.Cut(mk.Member, ":")
		if !known[mk.Member] {
			fault("mark %d: member %s was never pushed", i, mk.Member)
			continue
		}
		if mk.End {
			r := runs[mk.Run]
			if r == nil || r.member != mk.Member || r.ended {
				fault("mark %d: an end of run %s of %s without its start", i, mk.Run, mk.Member)
				continue
			}
			r.ended = true
			ended[mk.Member] = true
			delete(open[key], mk.Run)
			continue
		}
		if _, dup := runs[mk.Run]; dup {
			fault("mark %d: run %s started twice", i, mk.Run)
			continue
		}
		r := &run{id: mk.Run, member: mk.Member}
		runs[mk.Run] = r
		st.Runs++
		if lastRun[mk.Member] != nil {
			st.Extra++
		} else if p, ok := prev[mk.Member]; ok {
			switch pr := lastRun[p]; {
			case pr == nil:
				fault("mark %d: %s started before %s, dispatched before it, ever started", i, mk.Member, p)
			case !pr.ended:
				fault("mark %d: %s started while the last run (%s) of %s, dispatched before it, had not ended", i, mk.Member, pr.id, p)
			}
		}
		if n, ok := next[mk.Member]; ok && lastRun[n] != nil {
			fault("mark %d: %s ran again after %s, dispatched after it, had started", i, mk.Member, n)
		}
		lastRun[mk.Member] = r
		if open[key] == nil {
			open[key] = map[string]*run{}
		}
		for id, o := range open[key] {
			if o.member == mk.Member {
				st.Overlapped++
				delete(open[key], id)
				continue
			}
			fault("mark %d: %s (run %s) started while %s (run %s) of the same sequence ran", i, mk.Member, mk.Run, o.member, id)
		}
		open[key][mk.Run] = r
	}
	missing := 0
	for _, m := range want {
		if !ended[m] {
			missing++
			if missing <= 5 {
				t.Errorf("member %s never ran to its end", m)
			}
		}
	}
	if missing > 5 {
		t.Errorf("%d of %d members never ran to their end", missing, len(want))
	}
	return st
}
