// Package display formats figures for people: the dashboard's pages and
// the CLI's tables. It holds no queue semantics; the queue package's types
// carry data only.
package display

import (
	"strconv"
	"strings"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Count formats c with thousands separators and a "+" when it is capped
// (the true count is at least c.N): "10,000+"; an estimate (the true
// count is at most c.N) is marked "~": "~151,200".
func Count(c driver.Count) string {
	s := Int(c.N)
	if c.More {
		s += "+"
	}
	if c.Estimate {
		s = "~" + s
	}
	return s
}

// Int formats n with a comma between groups of three digits: "1,234,567".
func Int(n int64) string { return group(strconv.FormatInt(n, 10)) }

// Float formats f with prec digits after the point and thousands
// separators in the whole part: "4,983.7".
func Float(f float64, prec int) string {
	s := strconv.FormatFloat(f, 'f', prec, 64)
	whole, frac, ok := strings.Cut(s, ".")
	if ok {
		return group(whole) + "." + frac
	}
	return group(whole)
}

// group puts commas into a run of digits, after an optional sign.
func group(s string) string {
	sign := ""
	if s != "" && (s[0] == '-' || s[0] == '+') {
		sign, s = s[:1], s[1:]
	}
	if len(s) <= 3 {
		return sign + s
	}
	var b strings.Builder
	b.Grow(len(sign) + len(s) + len(s)/3)
	b.WriteString(sign)
	head := len(s) % 3
	if head == 0 {
		head = 3
	}
	b.WriteString(s[:head])
	for i := head; i < len(s); i += 3 {
		b.WriteByte(',')
		b.WriteString(s[i : i+3])
	}
	return b.String()
}
