package driver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/queue/driver"
)

func TestParseSearch(t *testing.T) {
	t.Parallel()
	field := func(not bool, value string, path ...string) driver.FieldFilter {
		return driver.FieldFilter{Path: path, Not: not, Value: json.RawMessage(value)}
	}
	for _, tc := range []struct {
		in   string
		want driver.Search
	}{
		{"", driver.Search{}},
		{"needle", driver.Search{Text: []string{"needle"}}},
		{` "user_id":42 `, driver.Search{Text: []string{` "user_id":42 `}}},
		{"payload", driver.Search{Text: []string{"payload"}}},
		{"my payload.x = 1", driver.Search{Text: []string{"my payload.x = 1"}}},
		{"payload.user_id = 42", driver.Search{Fields: []driver.FieldFilter{field(false, "42", "user_id")}}},
		{"  payload.user_id=42", driver.Search{Fields: []driver.FieldFilter{field(false, "42", "user_id")}}},
		{`payload.a.b-c.0 != "x y"`, driver.Search{Fields: []driver.FieldFilter{field(true, `"x y"`, "a", "b-c", "0")}}},
		{`payload."odd key".k = null`, driver.Search{Fields: []driver.FieldFilter{field(false, "null", "odd key", "k")}}},
		{`payload.vip = true AND payload.n != -1.5e3 and "ORD 7"`, driver.Search{
			Text:   []string{"ORD 7"},
			Fields: []driver.FieldFilter{field(false, "true", "vip"), field(true, "-1.5e3", "n")},
		}},
	} {
		got, err := driver.ParseSearch(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSearch(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSearchErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string // want: the error's text after "queue: bad search: "
	}{
		{"payload.", `at position 9: expected a field name (letters, digits, _ and -, or a "quoted" name), found the end of the search`},
		{"payload.a", `at position 10: expected = or != after the field, found the end of the search`},
		{"payload.a = ", `at position 13: expected a value (a "string", a number, true, false or null), found the end of the search`},
		{"payload.a = yes", `at position 13: expected a value (a "string", a number, true, false or null), found "yes"`},
		{"payload.a = 01", `at position 13: expected a value (a "string", a number, true, false or null), found "01"`},
		{`payload.a = "open`, `at position 13: expected a closing quote, found "\"open"`},
		{`payload.a = "\q"`, `at position 13: expected a JSON string (with JSON escapes), found "\"\\q\""`},
		{"payload.a = 1 OR payload.b = 2", `at position 15: expected AND or the end of the search, found "OR payload.b"`},
		{"payload.a = 1 AND", `at position 18: expected payload.FIELD or a "quoted" text, found the end of the search`},
		{"payload.a = 1 AND b = 2", `at position 19: expected payload.FIELD or a "quoted" text, found "b = 2"`},
		{`payload.a = 1 AND ""`, `at position 21: expected a non-empty string, found the end of the search`},
		{"payload.a < 1", `at position 11: expected = or != after the field, found "< 1"`},
		{"payload.a..b = 1", `at position 11: expected a field name (letters, digits, _ and -, or a "quoted" name), found ".b = 1"`},
		{"payload.a = 1" + strings.Repeat(" AND payload.a = 1", 16), `at position 289: expected at most 16 terms, found "payload.a = "`},
	} {
		_, err := driver.ParseSearch(tc.in)
		if !errors.Is(err, driver.ErrBadSearch) || err.Error() != "queue: bad search: "+tc.want {
			t.Errorf("ParseSearch(%q) = %v; want queue: bad search: %s", tc.in, err, tc.want)
		}
	}
}

func TestSearchMatch(t *testing.T) {
	t.Parallel()
	payload := []byte(`{"user_id":42,"name":"Ana \u00e9","vip":true,"gone":null,"score":1.50,"big":12345678901234567891,` +
		`"tags":["a","b"],"user":{"email":"ana@example.com","age":30},"odd key":{"k":1}}`)
	for _, tc := range []struct {
		search  string
		payload []byte
		want    bool
	}{
		{"", payload, true},
		{`"vip":true`, payload, true},
		{"payload.user_id = 42", payload, true},
		{"payload.user_id = 42.0", payload, true},
		{"payload.user_id = 4.2e1", payload, true},
		{"payload.user_id = 43", payload, false},
		{`payload.user_id = "42"`, payload, false},
		{"payload.user_id != 43", payload, true},
		{"payload.user_id != 42", payload, false},
		{"payload.big = 12345678901234567891", payload, true},
		{"payload.big = 12345678901234567890", payload, false},
		{"payload.score = 1.5", payload, true},
		{`payload.name = "Ana é"`, payload, true},
		{`payload.name = "Ana \u00e9"`, payload, true},
		{`payload.name = "ana é"`, payload, false},
		{"payload.vip = true", payload, true},
		{"payload.vip = 1", payload, false},
		{"payload.vip != false", payload, true},
		{"payload.gone = null", payload, true},
		{"payload.missing = null", payload, false},
		{"payload.missing != 1", payload, false},
		{`payload.user.email = "ana@example.com" AND payload.user.age = 30`, payload, true},
		{`payload.user.email = "ana@example.com" AND payload.user.age = 31`, payload, false},
		{`payload.tags.1 = "b"`, payload, true},
		{`payload.tags.2 = "b"`, payload, false},
		{`payload.tags.01 = "b"`, payload, false},
		{`payload.user = "x"`, payload, false},
		{`payload."odd key".k = 1`, payload, true},
		{`payload.user_id = 42 AND "ana@"`, payload, true},
		{`payload.user_id = 42 AND "bob@"`, payload, false},
		{"payload.user_id = 42", []byte(`{"user_id":42} trailing`), false},
		{"payload.user_id = 42", []byte("\xff\x00user_id 42"), false},
		{"payload.user_id != 1", []byte(`[1,2]`), false},
		{"payload.0 = 1", []byte(`[1,2]`), true},
		{"payload.n = 1e2000", []byte(`{"n":1e2000}`), true},
		{"payload.n = 1e-2000", []byte(`{"n":0}`), true}, // beyond ±1000: compared as float64s
	} {
		s, err := driver.ParseSearch(tc.search)
		if err != nil {
			t.Fatalf("ParseSearch(%q): %v", tc.search, err)
		}
		if got := s.Match(tc.payload); got != tc.want {
			t.Errorf("ParseSearch(%q).Match(%s) = %v, want %v", tc.search, tc.payload, got, tc.want)
		}
	}
}

// FuzzSearchQuery: ParseSearch never panics; what it accepts matches
// any payload without panicking; a search that does not start with
// "payload." is the one substring it is, and one that does either
// parses or fails with ErrBadSearch at a position within the search.
func FuzzSearchQuery(f *testing.F) {
	for _, s := range []string{"needle", "payload.user_id = 42", `payload.a.b != "x" AND payload.c = true and "t"`,
		`payload."k y".0 = null`, "payload.n = -1.5e+3", "payload.a = ", `payload.a = "\u00e9\"`, "payload.a = 1 AND AND"} {
		f.Add(s, []byte(`{"user_id":42,"a":{"b":"x"},"c":true,"k y":[null],"n":-1500}`))
	}
	f.Fuzz(func(t *testing.T, search string, payload []byte) {
		s, err := driver.ParseSearch(search)
		if err != nil {
			if !errors.Is(err, driver.ErrBadSearch) || !strings.HasPrefix(strings.TrimLeft(search, " \t"), "payload.") {
				t.Fatalf("ParseSearch(%q) = %v", search, err)
			}
			var pos int
			if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "queue: bad search: "), "at position %d:", &pos); scanErr != nil || pos < 1 || pos > len(search)+1 {
				t.Fatalf("ParseSearch(%q) = %v: no position within the search", search, err)
			}
			return
		}
		if !strings.HasPrefix(strings.TrimLeft(search, " \t"), "payload.") && search != "" &&
			(len(s.Text) != 1 || s.Text[0] != search || len(s.Fields) != 0) {
			t.Fatalf("ParseSearch(%q) = %+v, want the one substring", search, s)
		}
		s.Match(payload)
	})
}
