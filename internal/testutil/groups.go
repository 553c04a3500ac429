package testutil

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// GroupSet is one run of a group handler in a process test: the set's job
// ID, the attempt it ran as, and its members in order, each "key:n" (the
// member's group key and number).
type GroupSet struct {
	ID      string
	Attempt int
	Members []string
}

// Line is the log line a worker process writes for s: "gset", the ID, the
// attempt and the members joined by commas, four fields.
func (s GroupSet) Line() string {
	return fmt.Sprintf("gset %s %d %s", s.ID, s.Attempt, strings.Join(s.Members, ","))
}

// ParseGroupSet reads a line Line wrote; ok is false for any other line
// (or one cut short by a SIGKILL).
func ParseGroupSet(line string) (s GroupSet, ok bool) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "gset" {
		return s, false
	}
	a, err := strconv.Atoi(f[2])
	if err != nil {
		return s, false
	}
	return GroupSet{ID: f[1], Attempt: a, Members: strings.Split(f[3], ",")}, true
}

// CheckGroupSets judges the runs of group sets across processes that were
// killed: a set that ran more than once (again after a kill: at least
// once) held the same members each time, so a set is handed out whole;
// no member is in two different sets; each set holds members of one group
// only, at most maxSize, in the order they were pushed (want's order);
// and every member of want ran. It returns the runs beyond each set's
// first: the duplicate handler runs the kills caused.
func CheckGroupSets(t testing.TB, runs []GroupSet, want []string, maxSize int) (extra int) {
	t.Helper()
	order := make(map[string]int, len(want))
	for i, m := range want {
		order[m] = i
	}
	first := map[string][]string{} // set ID -> its members at its first run
	inSet := map[string]string{}   // member -> the set that holds it
	for _, r := range runs {
		if prev, ok := first[r.ID]; ok {
			extra++
			if !slices.Equal(prev, r.Members) {
				t.Errorf("set %s ran with members %v, and again with %v", r.ID, prev, r.Members)
			}
			continue
		}
		first[r.ID] = r.Members
		if len(r.Members) > maxSize {
			t.Errorf("set %s holds %d members, more than %d", r.ID, len(r.Members), maxSize)
		}
		key, _, _ := strings.Cut(r.Members[0], ":")
		for i, m := range r.Members {
			if k, _, _ := strings.Cut(m, ":"); k != key {
				t.Errorf("set %s holds members of groups %s and %s", r.ID, key, k)
			}
			if _, known := order[m]; !known {
				t.Errorf("set %s holds %s, which was never pushed", r.ID, m)
			}
			if i > 0 && order[m] < order[r.Members[i-1]] {
				t.Errorf("set %s holds %s after %s, pushed later", r.ID, r.Members[i-1], m)
			}
			if other, dup := inSet[m]; dup {
				t.Errorf("member %s is in two sets, %s and %s", m, other, r.ID)
			}
			inSet[m] = r.ID
		}
	}
	missing := 0
	for _, m := range want {
		if _, ok := inSet[m]; !ok {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d members never ran", missing, len(want))
	}
	return extra
}
