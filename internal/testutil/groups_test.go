package testutil

import (
	"fmt"
	"strings"
	"testing"
)

// errRecorder is a testing.TB that records Errorf.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Helper() {}
func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCheckGroupSets feeds CheckGroupSets the runs of a sound fleet and
// of each fault it must catch.
func TestCheckGroupSets(t *testing.T) {
	t.Parallel()
	want := []string{"a:1", "b:2", "a:3", "a:4"}
	set := func(id string, members ...string) GroupSet { return GroupSet{ID: id, Attempt: 1, Members: members} }
	for _, tc := range []struct {
		name  string
		runs  []GroupSet
		fault string // a part of the error wanted, "" for none
		extra int
	}{
		{"Sound", []GroupSet{set("s1", "a:1", "a:3"), set("s2", "b:2"), set("s3", "a:4")}, "", 0},
		{"RunAgainWhole", []GroupSet{set("s1", "a:1", "a:3"), set("s1", "a:1", "a:3"), set("s2", "b:2"), set("s3", "a:4")}, "", 1},
		{"RunAgainOther", []GroupSet{set("s1", "a:1", "a:3"), set("s1", "a:1"), set("s2", "b:2"), set("s3", "a:4")}, "and again", 1},
		{"MemberTwice", []GroupSet{set("s1", "a:1", "a:3"), set("s2", "b:2"), set("s3", "a:3", "a:4")}, "two sets", 0},
		{"TwoGroups", []GroupSet{set("s1", "a:1", "b:2"), set("s2", "a:3", "a:4")}, "groups a and b", 0},
		{"Order", []GroupSet{set("s1", "a:3", "a:1"), set("s2", "b:2"), set("s3", "a:4")}, "pushed later", 0},
		{"TooBig", []GroupSet{set("s1", "a:1", "a:3", "a:4"), set("s2", "b:2")}, "more than 2", 0},
		{"Missing", []GroupSet{set("s1", "a:1", "a:3"), set("s2", "b:2")}, "never ran", 0},
		{"Unknown", []GroupSet{set("s1", "a:1", "a:3"), set("s2", "b:2"), set("s3", "a:4"), set("s4", "c:9")}, "never pushed", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &errRecorder{TB: t}
			extra := CheckGroupSets(r, tc.runs, want, 2)
			got := strings.Join(r.errs, "; ")
			if tc.fault == "" && got != "" || tc.fault != "" && !strings.Contains(got, tc.fault) {
				t.Errorf("errors %q, want %q", got, tc.fault)
			}
			if extra != tc.extra {
				t.Errorf("extra = %d, want %d", extra, tc.extra)
			}
		})
	}
	s := GroupSet{ID: "x", Attempt: 2, Members: []string{"a:1", "a:2"}}
	if got, ok := ParseGroupSet(s.Line()); !ok || got.ID != "x" || got.Attempt != 2 || len(got.Members) != 2 {
		t.Errorf("ParseGroupSet(%q) = %+v, %v", s.Line(), got, ok)
	}
	if _, ok := ParseGroupSet("gset x 1"); ok {
		t.Errorf("a line cut short parsed")
	}
}
