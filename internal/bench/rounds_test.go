package bench

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}}
	for _, tt := range tests {
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRoundsTable(t *testing.T) {
	t.Parallel()
	r := NewRounds("Peer", "Meridian")
	r.Add("Peer", []Figure{{Name: "work", Value: 10_000, Unit: PerSecond}, {Name: "mem", Value: 900, Unit: Bytes}})
	r.Add("Meridian", []Figure{{Name: "work", Value: 30_000, Unit: PerSecond}, {Name: "mem", Value: 450, Unit: Bytes}})
	r.Add("Peer", []Figure{{Name: "work", Value: 12_000, Unit: PerSecond}})
	r.Add("Meridian", []Figure{{Name: "work", Value: 34_000, Unit: PerSecond}})
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := "| figure | Peer | Meridian | Meridian / Peer (medians) |\n|---|---|---|---|\n" +
		"| work, jobs/s | 10.0k / 12.0k | 30.0k / 34.0k | 2.91x |\n" +
		"| mem, B | 900 | 450 | 0.50x |\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
