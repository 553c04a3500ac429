package balance

import (
	"slices"
	"testing"
)

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func TestEven(t *testing.T) {
	t.Parallel()
	if got := Even(3, 10); !slices.Equal(got, []int{4, 3, 3}) {
		t.Fatalf("Even(3, 10) = %v", got)
	}
}

func TestTargetSharesBudgetByLoad(t *testing.T) {
	t.Parallel()
	got := Target([]int{5, 5}, []float64{100, 0}, 10, 1)
	if !slices.Equal(got, []int{9, 1}) {
		t.Fatalf("Target = %v, want [9 1]: the idle queue keeps its floor", got)
	}
	got = Target([]int{2, 8}, []float64{0, 0}, 10, 1)
	if !slices.Equal(got, []int{2, 8}) {
		t.Fatalf("Target with no load = %v, want the allotments kept", got)
	}
	got = Target([]int{4, 3, 3}, []float64{1, 1, 1}, 11, 2)
	if sum(got) != 11 || slices.Min(got) < 2 {
		t.Fatalf("Target = %v: want the whole budget, each at least 2", got)
	}
}

// TestShiftRules: whatever the allotments and targets, a shift keeps the
// sum within the budget, each queue at or above the floor, and moves each
// queue by at most maxShift, towards its target.
func TestShiftRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cur, target []int
		budget      int
	}{
		{[]int{5, 5}, []int{9, 1}, 10},
		{[]int{9, 1}, []int{1, 9}, 10},
		{[]int{1, 1, 8}, []int{4, 4, 2}, 10},
		{[]int{3, 3}, []int{8, 2}, 10}, // spare budget
		{[]int{1, 1, 1, 17}, []int{5, 5, 5, 5}, 20},
	}
	for _, c := range cases {
		for maxShift := 1; maxShift <= 4; maxShift++ {
			cur := slices.Clone(c.cur)
			for range 30 {
				next := Shift(cur, c.target, c.budget, 1, maxShift)
				if sum(next) > c.budget {
					t.Fatalf("%v -> %v: sum %d over the budget %d", cur, next, sum(next), c.budget)
				}
				for i := range next {
					d := next[i] - cur[i]
					if d > maxShift || -d > maxShift {
						t.Fatalf("%v -> %v: queue %d moved by %d, more than %d", cur, next, i, d, maxShift)
					}
					if next[i] < 1 {
						t.Fatalf("%v -> %v: queue %d below the floor", cur, next, i)
					}
					if (d > 0 && next[i] > c.target[i]) || (d < 0 && next[i] < c.target[i]) {
						t.Fatalf("%v -> %v: queue %d overshot its target %d", cur, next, i, c.target[i])
					}
				}
				cur = next
			}
			if !slices.Equal(cur, c.target) {
				t.Fatalf("from %v by %d: ended at %v, not the target %v", c.cur, maxShift, cur, c.target)
			}
		}
	}
}

// TestPickerWindows: in every run of picks as long as the weights' sum,
// each queue is picked its weight's number of times.
func TestPickerWindows(t *testing.T) {
	t.Parallel()
	weights := []int{6, 3, 1}
	p := NewPicker(weights)
	var picks []int
	for range 100 {
		picks = append(picks, p.Next())
	}
	for i := 0; i+10 <= len(picks); i += 10 {
		n := make([]int, 3)
		for _, q := range picks[i : i+10] {
			n[q]++
		}
		if !slices.Equal(n, weights) {
			t.Fatalf("picks %d..%d: %v, want %v", i, i+9, n, weights)
		}
	}
	if got := NewPicker(weights).Split(20); !slices.Equal(got, []int{12, 6, 2}) {
		t.Fatalf("Split(20) = %v", got)
	}
}

func TestQueuesOfWeights(t *testing.T) {
	t.Parallel()
	o := Options{Strategy: Weighted, Weights: map[string]int{"low": 1, "critical": 6, "default": 3}}
	if got := o.Queues([]string{"default"}, false); !slices.Equal(got, []string{"critical", "default", "low"}) {
		t.Fatalf("Queues unset = %v", got)
	}
	if got := o.Queues([]string{"low", "other"}, true); !slices.Equal(got, []string{"low", "other", "critical", "default"}) {
		t.Fatalf("Queues set = %v", got)
	}
}
