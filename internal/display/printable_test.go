package display_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/meridianjobs/meridian/internal/display"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain text, tabs\tand\nnewlines", "plain text, tabs\tand\nnewlines"},
		{"\x1b[31mred\x1b[0m", `\u001b[31mred\u001b[0m`},
		{"title\x1b]0;pwned\x07", `title\u001b]0;pwned\u0007`},
		{"over\rwrite", `over\u000dwrite`},
		{"del\x7f", `del\u007f`},
		{"csi \u009b2J", `csi \u009b2J`},
		{"naïve café ✓", "naïve café ✓"},
	}
	for _, tc := range tests {
		if got := display.Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPrintableWriter(t *testing.T) {
	t.Parallel()
	in := "a\x1b[2J é \u009b6n ✓ \x7f end\n"
	want := display.Printable(in)
	// Every split of the input into two writes gives the same output.
	for cut := range len(in) + 1 {
		var b bytes.Buffer
		w := display.NewPrintableWriter(&b)
		for _, part := range []string{in[:cut], in[cut:]} {
			if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
				t.Fatalf("Write(%q) = %d, %v", part, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Errorf("split at %d: wrote %q, want %q", cut, b.String(), want)
		}
	}
}

// JSON through Printable stays valid and decodes to the same values.
func TestPrintableKeepsJSON(t *testing.T) {
	t.Parallel()
	v := map[string]string{"last_error": "boom \x1b[31m\x7f\u0085\u009b", "name": "ok"}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(display.Printable(string(raw))), &back); err != nil {
		t.Fatalf("Printable(%s) is no longer JSON: %v", raw, err)
	}
	if back["last_error"] != v["last_error"] || back["name"] != v["name"] {
		t.Errorf("decoded %q, want %q", back, v)
	}
}
