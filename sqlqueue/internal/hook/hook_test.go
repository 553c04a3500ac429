package hook

import (
	"slices"
	"testing"
)

func TestPayload(t *testing.T) {
	t.Parallel()
	cases := []struct {
		origin, queues string
		want           []string
		all            bool
	}{
		{"", "mail", []string{"mail"}, false},
		{"", "mail\nreports", []string{"mail", "reports"}, false},
		{"", "", nil, true},
		{"abc", "mail", []string{"mail"}, false},
		{"abc", "mail\nreports", []string{"mail", "reports"}, false},
		{"abc", "", nil, true},
		// A queue may be named like an origin: only the first line after
		// the empty one is the origin.
		{"abc", "abc\nmail", []string{"abc", "mail"}, false},
	}
	for _, c := range cases {
		p := MarkPayload(c.origin, c.queues)
		queues, all, origin := ParsePayload(p)
		if !slices.Equal(queues, c.want) || all != c.all || origin != c.origin {
			t.Errorf("ParsePayload(MarkPayload(%q, %q) = %q) = %q, %v, %q; want %q, %v, %q", c.origin, c.queues, p, queues, all, origin, c.want, c.all, c.origin)
		}
	}
}
