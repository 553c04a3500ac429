package testutil

import (
	"strings"
	"testing"
)

// TestCheckSequences feeds CheckSequences the marks of a sound fleet and
// of each fault it must catch.
func TestCheckSequences(t *testing.T) {
	t.Parallel()
	want := []string{"a:0", "b:1", "a:2", "a:3"}
	s := func(m, run string) SeqMark { return SeqMark{Member: m, Run: run} }
	e := func(m, run string) SeqMark { return SeqMark{Member: m, Run: run, End: true} }
	for _, tc := range []struct {
		name  string
		marks []SeqMark
		fault string // a part of the error wanted, "" for none
		stats SeqStats
	}{
		{"Sound", []SeqMark{s("a:0", "1"), s("b:1", "2"), e("a:0", "1"), s("a:2", "3"), e("b:1", "2"), e("a:2", "3"), s("a:3", "4"), e("a:3", "4")},
			"", SeqStats{Runs: 4}},
		// a:0 killed mid-run, run again once its lease ended.
		{"KilledThenAgain", []SeqMark{s("a:0", "1"), s("b:1", "2"), e("b:1", "2"), s("a:0", "5"), e("a:0", "5"), s("a:2", "3"), e("a:2", "3"), s("a:3", "4"), e("a:3", "4")},
			"", SeqStats{Runs: 5, Extra: 1, Overlapped: 1}},
		// a:2 killed after its end, before its ack: it runs again.
		{"EndedThenAgain", []SeqMark{s("a:0", "1"), e("a:0", "1"), s("b:1", "2"), e("b:1", "2"), s("a:2", "3"), e("a:2", "3"), s("a:2", "5"), e("a:2", "5"), s("a:3", "4"), e("a:3", "4")},
			"", SeqStats{Runs: 5, Extra: 1}},
		{"Overtaken", []SeqMark{s("a:0", "1"), e("a:0", "1"), s("b:1", "2"), e("b:1", "2"), s("a:3", "4"), e("a:3", "4"), s("a:2", "3"), e("a:2", "3")},
			"dispatched before it, ever started", SeqStats{Runs: 4}},
		{"Together", []SeqMark{s("a:0", "1"), s("a:2", "3"), e("a:0", "1"), e("a:2", "3"), s("b:1", "2"), e("b:1", "2"), s("a:3", "4"), e("a:3", "4")},
			"had not ended", SeqStats{Runs: 4}},
		// a:0 killed mid-run, and a:2 let through beside it.
		{"BesideKilled", []SeqMark{s("a:0", "1"), s("a:2", "3"), e("a:2", "3"), s("a:0", "5"), e("a:0", "5"), s("b:1", "2"), e("b:1", "2"), s("a:3", "4"), e("a:3", "4")},
			"of the same sequence ran", SeqStats{Runs: 5, Extra: 1, Overlapped: 1}},
		{"AgainAfterNext", []SeqMark{s("a:0", "1"), e("a:0", "1"), s("a:2", "3"), e("a:2", "3"), s("a:0", "5"), e("a:0", "5"), s("b:1", "2"), e("b:1", "2"), s("a:3", "4"), e("a:3", "4")},
			"ran again after a:2", SeqStats{Runs: 5, Extra: 1}},
		{"NeverEnded", []SeqMark{s("a:0", "1"), e("a:0", "1"), s("b:1", "2"), s("a:2", "3"), e("a:2", "3"), s("a:3", "4"), e("a:3", "4")},
			"b:1 never ran to its end", SeqStats{Runs: 4}},
		{"Unknown", []SeqMark{s("a:0", "1"), e("a:0", "1"), s("c:9", "9"), s("b:1", "2"), e("b:1", "2"), s("a:2", "3"), e("a:2", "3"), s("a:3", "4"), e("a:3", "4")},
			"never pushed", SeqStats{Runs: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &errRecorder{TB: t}
			stats := CheckSequences(r, tc.marks, want)
			got := strings.Join(r.errs, "; ")
			if tc.fault == "" && got != "" || tc.fault != "" && !strings.Contains(got, tc.fault) {
				t.Errorf("errors %q, want %q", got, tc.fault)
			}
			if stats != tc.stats {
				t.Errorf("stats = %+v, want %+v", stats, tc.stats)
			}
		})
	}
	m := SeqMark{Member: "a:1", Run: "12.3", End: true}
	if got, ok := ParseSeqMark(m.Line()); !ok || got != m {
		t.Errorf("ParseSeqMark(%q) = %+v, %v", m.Line(), got, ok)
	}
	if _, ok := ParseSeqMark("seq a:1 12.3"); ok {
		t.Errorf("a line cut short parsed")
	}
}
