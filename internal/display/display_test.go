package display_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/meridianjobs/meridian/internal/display"
	"github.com/meridianjobs/meridian/queue/driver"
)

func TestCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		c    driver.Count
		want string
	}{
		{driver.Count{N: 0}, "0"},
		{driver.Count{N: 999}, "999"},
		{driver.Count{N: 1000}, "1,000"},
		{driver.Count{N: 10000, More: true}, "10,000+"},
		{driver.Count{N: 151200, Estimate: true}, "~151,200"},
		{driver.Count{N: 1234567}, "1,234,567"},
		{driver.Count{N: -1234}, "-1,234"},
		{driver.Count{N: math.MinInt64}, "-9,223,372,036,854,775,808"},
	}
	for _, tc := range tests {
		if got := display.Count(tc.c); got != tc.want {
			t.Errorf("Count(%+v) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

func TestFloat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f    float64
		prec int
		want string
	}{
		{0, 1, "0.0"},
		{4983.66, 1, "4,983.7"},
		{409863, 0, "409,863"},
		{999.95, 1, "1,000.0"},
		{-1234567.25, 2, "-1,234,567.25"},
		{12.5, 1, "12.5"},
	}
	for _, tc := range tests {
		if got := display.Float(tc.f, tc.prec); got != tc.want {
			t.Errorf("Float(%v, %d) = %q, want %q", tc.f, tc.prec, got, tc.want)
		}
	}
}

func ExampleCount() {
	fmt.Println(display.Count(driver.Count{N: 10000, More: true}))
	fmt.Println(display.Float(4983.66, 1))
	// Output:
	// 10,000+
	// 4,983.7
}
