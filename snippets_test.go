package meridian_test

// TestDocSnippets type-checks every ```go block of README.md and docs/*.md
// against the module's packages, so the documentation cannot drift from the
// API.
//
// # Writing a snippet
//
// A block is checked as the body of a function, in a file whose imports and
// top-level declarations come from an HTML comment right before the fence
// (invisible on GitHub):
//
//	<!-- snippet
//	import "github.com/meridianjobs/meridian/queue"
//
//	var q queue.Queue
//	-->
//	```go
//	w := queue.NewWorker(q)
//	```
//
// "<!-- snippet decls" checks the block as top-level declarations instead,
// and "<!-- snippet skip REASON -->" leaves it out (an outline that is not
// Go). An import declaration at the head of a body block moves to the top
// level. Variables declared and not used are allowed, every other error
// fails the test, reported at the Markdown file's line. Blocks fenced as
// anything but ```go (sh, text) are not checked.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// snippet is one fenced Go block and the directive before it.
type snippet struct {
	file     string // path of the Markdown file
	line     int    // line of the block's first code line
	code     string
	mode     string // "body" (default), "decls" or "skip"
	preamble string // imports and declarations the block assumes
}

// The directive is an HTML comment right before the fence (blank lines
// allowed between them):
//
//	<!-- snippet [body|decls|skip REASON]
//	import "github.com/meridianjobs/meridian/queue"
//	var q queue.Queue
//	-->
func readSnippets(t *testing.T, path string) []snippet {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out       []snippet
		directive []string // the last directive seen, until a non-blank line
		inComment bool
		comment   []string
		inBlock   bool
		cur       snippet
		code      []string
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case inBlock:
			if strings.TrimSpace(line) == "```" {
				cur.code = strings.Join(code, "\n") + "\n"
				out = append(out, cur)
				inBlock, code = false, nil
				continue
			}
			code = append(code, line)
		case inComment:
			if strings.TrimSpace(line) == "-->" {
				inComment, directive = false, comment
				continue
			}
			comment = append(comment, line)
		case strings.HasPrefix(line, "<!-- snippet"):
			first := strings.TrimPrefix(line, "<!--")
			if rest, ok := strings.CutSuffix(strings.TrimSpace(first), "-->"); ok {
				directive = []string{strings.TrimSpace(rest)}
				continue
			}
			inComment, comment = true, []string{strings.TrimSpace(first)}
		case strings.HasPrefix(line, "```go"):
			cur = snippet{file: path, line: n + 1, mode: "body"}
			if directive != nil {
				head := strings.Fields(directive[0]) // "snippet", mode, reason...
				if len(head) > 1 {
					cur.mode = head[1]
				}
				if cur.mode == "skip" && len(head) < 3 {
					t.Errorf("%s:%d: a skipped snippet must say why: <!-- snippet skip REASON -->", path, n)
				}
				cur.preamble = strings.Join(directive[1:], "\n")
			}
			directive = nil
			inBlock = true
		case strings.TrimSpace(line) != "":
			directive = nil
		}
	}
	if inBlock {
		t.Errorf("%s: unterminated ```go block starting at line %d", path, cur.line)
	}
	return out
}

// source is the Go file a snippet is checked as. Imports at the head of a
// body snippet move to the top level; the rest goes in a function.
func (s snippet) source() string {
	var b strings.Builder
	b.WriteString("package snippet\n\n")
	code := s.code
	if s.mode == "body" {
		imports, rest := splitImports(code)
		b.WriteString(imports)
		code = rest
	}
	b.WriteString(s.preamble)
	b.WriteString("\n")
	line := s.line
	if s.mode == "body" {
		line += strings.Count(s.code, "\n") - strings.Count(code, "\n")
		b.WriteString("func _() {\n")
	}
	fmt.Fprintf(&b, "//line %s:%d\n", s.file, line)
	b.WriteString(code)
	if s.mode == "body" {
		b.WriteString("}\n")
	}
	return b.String()
}

// splitImports cuts a leading import declaration (single or grouped) off code.
func splitImports(code string) (imports, rest string) {
	lines := strings.SplitAfter(code, "\n")
	i := 0
	for i < len(lines) {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "" || strings.HasPrefix(l, "//"):
			i++
		case strings.HasPrefix(l, "import ("):
			for i < len(lines) && strings.TrimSpace(lines[i]) != ")" {
				i++
			}
			i++
		case strings.HasPrefix(l, "import "):
			i++
		default:
			return strings.Join(lines[:i], ""), strings.Join(lines[i:], "")
		}
	}
	return strings.Join(lines[:i], ""), ""
}

func TestDocSnippets(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md"}, files...)

	fset := token.NewFileSet()
	type parsed struct {
		snippet
		file *ast.File
	}
	var all []parsed
	imports := map[string]bool{}
	for _, f := range files {
		for _, s := range readSnippets(t, f) {
			if s.mode == "skip" {
				continue
			}
			if s.mode != "body" && s.mode != "decls" {
				t.Errorf("%s:%d: unknown snippet mode %q (body, decls or skip)", s.file, s.line, s.mode)
				continue
			}
			// The //line directive in the source names the Markdown file.
			af, err := parser.ParseFile(fset, "snippet.go", s.source(), parser.SkipObjectResolution)
			if err != nil {
				t.Errorf("%v\n(the snippet as checked:\n%s)", err, s.source())
				continue
			}
			for _, imp := range af.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				imports[p] = true
			}
			all = append(all, parsed{s, af})
		}
	}
	if len(all) == 0 {
		t.Fatal("found no Go snippets: is the test running in the repository root?")
	}

	// One `go list -export` compiles (or finds in the build cache) every
	// imported package and its dependencies: one build for all snippets.
	exports := exportData(t, slices.Sorted(func(yield func(string) bool) {
		for p := range imports {
			if !yield(p) {
				return
			}
		}
	}))
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(f)
	})
	for _, p := range all {
		conf := types.Config{
			Importer: imp,
			Error: func(err error) {
				// A snippet shows a call's result without always using
				// it; everything else is a real error.
				if te, ok := err.(types.Error); ok && strings.Contains(te.Msg, "declared and not used") {
					return
				}
				if strings.HasPrefix(err.Error(), "snippet.go:") {
					t.Errorf("%s:%d: in the snippet directive's preamble: %v", p.snippet.file, p.line, err)
					return
				}
				t.Errorf("%v", err)
			},
		}
		_, _ = conf.Check("snippet", fset, []*ast.File{p.file}, nil)
	}
}

// exportData returns the export data file of each package in pkgs and their
// dependencies, as the go command builds them in this module.
func exportData(t *testing.T, pkgs []string) map[string]string {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Export,Error"}, pkgs...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	m := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath, Export string
			Error              *struct{ Err string }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		m[p.ImportPath] = p.Export
	}
	return m
}
