package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrBadSearch is returned (wrapped, with the position and what was
// expected) by ParseSearch, and by ListJobs and the bulk calls of a store,
// for a JobFilter.Search that starts as a field filter and does not parse.
var ErrBadSearch = errors.New("queue: bad search")

// Search is a parsed JobFilter.Search (see ParseSearch): substrings the
// payload must hold and field filters its JSON must pass, all of them.
type Search struct {
	// Text are byte substrings the payload must each hold
	// (case-sensitive).
	Text []string
	// Fields are the field filters; a payload that is not JSON (or not
	// an object at a filter's path) passes none.
	Fields []FieldFilter
}

// FieldFilter is one field filter of a Search: the JSON value at Path
// in the payload compared with Value.
type FieldFilter struct {
	// Path is the field's names from the payload's top level, each an
	// object's key (or, on an array, an index from 0).
	Path []string
	// Not is true for != (the field exists and differs from Value),
	// false for = (the field exists and equals Value).
	Not bool
	// Value is the JSON literal the field is compared with: a string, a
	// number (compared by value: 42, 42.0 and 4.2e1 are equal), true,
	// false or null.
	Value json.RawMessage
}

// maxSearchTerms bounds the terms of one search.
const maxSearchTerms = 16

// ParseSearch reads a search as ListJobs takes it in JobFilter.Search.
// A search that starts with "payload." (after spaces) is one or more
// terms joined by AND (any case): a field filter, payload.PATH = VALUE or
// payload.PATH != VALUE, where PATH is names joined by dots (letters,
// digits, _ and -; or a JSON string for any other name) and VALUE a JSON
// string, number, true, false or null; or a JSON string, a substring the
// payload must hold. For example:
//
//	payload.user_id = 42
//	payload.user.email = "ana@example.com" AND payload.vip != true
//	payload.kind = "refund" AND "ORD-7781"
//
// Any other search is one substring, taken as it is (spaces and quotes
// included), as searches have always been. A field filter matches only
// payloads that are JSON and hold the field: != does not match a payload
// without it. A search that starts with "payload." and does not parse
// returns an error matching ErrBadSearch that names the position (a
// byte offset from 1) and what was expected there.
func ParseSearch(s string) (Search, error) {
	trimmed := strings.TrimLeft(s, " \t")
	if !strings.HasPrefix(trimmed, "payload.") {
		if s == "" {
			return Search{}, nil
		}
		return Search{Text: []string{s}}, nil
	}
	p := &searchParser{s: s, pos: len(s) - len(trimmed)}
	var out Search
	for {
		p.space()
		if len(out.Text)+len(out.Fields) == maxSearchTerms {
			return Search{}, p.fail("at most %d terms", maxSearchTerms)
		}
		if err := p.term(&out); err != nil {
			return Search{}, err
		}
		p.space()
		if p.pos == len(p.s) {
			return out, nil
		}
		if !p.keyword("AND") {
			return Search{}, p.fail("AND or the end of the search")
		}
	}
}

// IsZero reports whether the search selects every payload.
func (s Search) IsZero() bool { return len(s.Text) == 0 && len(s.Fields) == 0 }

// Match reports whether payload holds every substring of s and passes
// every field filter.
func (s Search) Match(payload []byte) bool {
	for _, t := range s.Text {
		if !bytes.Contains(payload, []byte(t)) {
			return false
		}
	}
	if len(s.Fields) == 0 {
		return true
	}
	if !json.Valid(payload) {
		return false
	}
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return false
	}
	for _, f := range s.Fields {
		if !f.match(doc) {
			return false
		}
	}
	return true
}

// match reports whether doc passes f.
func (f FieldFilter) match(doc any) bool {
	v := doc
	for _, name := range f.Path {
		switch c := v.(type) {
		case map[string]any:
			x, ok := c[name]
			if !ok {
				return false
			}
			v = x
		case []any:
			i, err := strconv.Atoi(name)
			if err != nil || i < 0 || i >= len(c) || name != strconv.Itoa(i) {
				return false
			}
			v = c[i]
		default:
			return false
		}
	}
	return jsonEqual(v, f.Value) != f.Not
}

// jsonEqual reports whether v (decoded with UseNumber) equals the JSON
// literal lit (a string, number, true, false or null, as ParseSearch
// checked). Objects and arrays equal no literal.
func jsonEqual(v any, lit json.RawMessage) bool {
	switch x := v.(type) {
	case nil:
		return string(lit) == "null"
	case bool:
		return string(lit) == strconv.FormatBool(x)
	case string:
		var s string
		return lit[0] == '"' && json.Unmarshal(lit, &s) == nil && s == x
	case json.Number:
		return lit[0] != '"' && numbersEqual(x.String(), string(lit))
	}
	return false
}

// numbersEqual reports whether the JSON numbers a and b have the same
// value: exactly, as fractions, unless an exponent is beyond ±1000
// (then as float64s).
func numbersEqual(a, b string) bool {
	if modestExponent(a) && modestExponent(b) {
		x, ok1 := new(big.Rat).SetString(a)
		y, ok2 := new(big.Rat).SetString(b)
		return ok1 && ok2 && x.Cmp(y) == 0
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return (err1 == nil || errors.Is(err1, strconv.ErrRange)) && (err2 == nil || errors.Is(err2, strconv.ErrRange)) && x == y
}

// modestExponent reports whether the JSON number n has no exponent or
// one within ±1000.
func modestExponent(n string) bool {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	return err == nil && e >= -1000 && e <= 1000
}

// searchParser reads a field-filter search from s, at pos.
type searchParser struct {
	s   string
	pos int
}

// fail returns an ErrBadSearch error at the current position, saying
// what was expected there and what was found.
func (p *searchParser) fail(format string, args ...any) error {
	found := "the end of the search"
	if p.pos < len(p.s) {
		r := []rune(p.s[p.pos:])
		found = strconv.Quote(string(r[:min(len(r), 12)]))
	}
	return fmt.Errorf("%w: at position %d: expected %s, found %s", ErrBadSearch, p.pos+1, fmt.Sprintf(format, args...), found)
}

func (p *searchParser) space() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

// keyword consumes word (any case) when it stands alone at pos.
func (p *searchParser) keyword(word string) bool {
	end := p.pos + len(word)
	if end > len(p.s) || !strings.EqualFold(p.s[p.pos:end], word) || end < len(p.s) && p.s[end] != ' ' && p.s[end] != '\t' {
		return false
	}
	p.pos = end
	return true
}

// term reads one field filter or quoted substring into out.
func (p *searchParser) term(out *Search) error {
	p.space()
	if p.pos < len(p.s) && p.s[p.pos] == '"' {
		text, err := p.str()
		if err != nil {
			return err
		}
		if text == "" {
			return p.fail("a non-empty string")
		}
		out.Text = append(out.Text, text)
		return nil
	}
	if !strings.HasPrefix(p.s[p.pos:], "payload.") {
		return p.fail(`payload.FIELD or a "quoted" text`)
	}
	p.pos += len("payload.")
	var f FieldFilter
	for {
		name, err := p.name()
		if err != nil {
			return err
		}
		f.Path = append(f.Path, name)
		if p.pos == len(p.s) || p.s[p.pos] != '.' {
			break
		}
		p.pos++
	}
	p.space()
	switch {
	case strings.HasPrefix(p.s[p.pos:], "!="):
		f.Not = true
		p.pos += 2
	case strings.HasPrefix(p.s[p.pos:], "="):
		p.pos++
	default:
		return p.fail("= or != after the field")
	}
	p.space()
	v, err := p.value()
	if err != nil {
		return err
	}
	f.Value = v
	out.Fields = append(out.Fields, f)
	return nil
}

// name reads one name of a field's path: a run of letters, digits, _ and
// -, or a JSON string.
func (p *searchParser) name() (string, error) {
	if p.pos < len(p.s) && p.s[p.pos] == '"' {
		return p.str()
	}
	start := p.pos
	for p.pos < len(p.s) && isNameByte(p.s[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return "", p.fail(`a field name (letters, digits, _ and -, or a "quoted" name)`)
	}
	return p.s[start:p.pos], nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// str reads a JSON string at pos and returns its value.
func (p *searchParser) str() (string, error) {
	raw, err := p.literal()
	if err != nil {
		return "", err
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", p.fail("a JSON string")
	}
	return s, nil
}

// value reads a JSON string, number, true, false or null at pos.
func (p *searchParser) value() (json.RawMessage, error) {
	if p.pos == len(p.s) {
		return nil, p.fail(`a value (a "string", a number, true, false or null)`)
	}
	start := p.pos
	raw, err := p.literal()
	if err != nil {
		return nil, err
	}
	if !json.Valid(raw) {
		p.pos = start
		return nil, p.fail(`a value (a "string", a number, true, false or null)`)
	}
	return raw, nil
}

// literal reads the bytes of one JSON scalar at pos: a string up to its
// closing quote, or a run of the bytes a number or a word holds.
func (p *searchParser) literal() (json.RawMessage, error) {
	start := p.pos
	if p.s[p.pos] == '"' {
		p.pos++
		for p.pos < len(p.s) {
			switch p.s[p.pos] {
			case '\\':
				p.pos += 2
				continue
			case '"':
				p.pos++
				if !utf8.ValidString(p.s[start:p.pos]) {
					p.pos = start
					return nil, p.fail("a string of valid UTF-8")
				}
				var s string
				if json.Unmarshal([]byte(p.s[start:p.pos]), &s) != nil {
					p.pos = start
					return nil, p.fail("a JSON string (with JSON escapes)")
				}
				return json.RawMessage(p.s[start:p.pos]), nil
			}
			p.pos++
		}
		p.pos = start
		return nil, p.fail("a closing quote")
	}
	for p.pos < len(p.s) && (isNameByte(p.s[p.pos]) || p.s[p.pos] == '.' || p.s[p.pos] == '+') {
		p.pos++
	}
	if p.pos == start {
		return nil, p.fail(`a value (a "string", a number, true, false or null)`)
	}
	return json.RawMessage(p.s[start:p.pos]), nil
}
