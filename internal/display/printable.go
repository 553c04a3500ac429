package display

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Printable returns s with every control character but tab and newline
// (C0, DEL and the C1 range U+0080-U+009F) replaced by its \uXXXX escape,
// so that text from a store (a handler's error, a job's name or payload)
// cannot move the cursor, recolour or retitle a terminal. \uXXXX is also a
// JSON escape of the same character, so JSON passed through stays valid
// and decodes to the same values.
func Printable(s string) string {
	i := strings.IndexFunc(s, isControl)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		writeRune(&b, r)
	}
	return b.String()
}

// isControl reports whether r is a control character Printable escapes.
func isControl(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f
}

func writeRune(b *strings.Builder, r rune) {
	if isControl(r) {
		fmt.Fprintf(b, `\u%04x`, r)
		return
	}
	b.WriteRune(r)
}

// PrintableWriter passes what is written to it on to its writer through
// Printable: a command's standard output and error, which show text from
// the store. A character split between two writes is escaped as a whole.
// It is safe for concurrent use.
type PrintableWriter struct {
	mu   sync.Mutex
	w    io.Writer
	tail []byte // the start of a UTF-8 sequence the last write ended in
}

// NewPrintableWriter returns a PrintableWriter writing to w.
func NewPrintableWriter(w io.Writer) *PrintableWriter { return &PrintableWriter{w: w} }

// Write writes p through Printable and reports len(p) written on success,
// as io.Writer requires, though more bytes may reach the writer.
func (pw *PrintableWriter) Write(p []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	buf := p
	if len(pw.tail) > 0 {
		buf = append(pw.tail, p...)
		pw.tail = nil
	}
	// Keep back an incomplete UTF-8 sequence at the end for the next
	// write, unless it can never complete.
	keep := 0
	for k := 1; k <= utf8.UTFMax-1 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if utf8.RuneStart(c) {
			if c >= 0xc0 && !utf8.FullRune(buf[len(buf)-k:]) {
				keep = k
			}
			break
		}
	}
	out := buf[:len(buf)-keep]
	if keep > 0 {
		pw.tail = append([]byte(nil), buf[len(buf)-keep:]...)
	}
	if _, err := io.WriteString(pw.w, Printable(string(out))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes an incomplete UTF-8 sequence kept back from the last write,
// as it is.
func (pw *PrintableWriter) Flush() error {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if len(pw.tail) == 0 {
		return nil
	}
	_, err := pw.w.Write(pw.tail)
	pw.tail = nil
	return err
}
