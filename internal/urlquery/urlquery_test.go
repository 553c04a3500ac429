package urlquery_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/meridianjobs/meridian/internal/urlquery"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw     string
		want    url.Values // nil with an error
		errWant string     // part of the error
	}{
		{"", url.Values{}, ""},
		{"table=jobs&setup=false", url.Values{"table": {"jobs"}, "setup": {"false"}}, ""},
		{"table=staging%3Bjobs", url.Values{"table": {"staging;jobs"}}, ""},
		{"a=1&&b=2&", url.Values{"a": {"1"}, "b": {"2"}}, ""},
		{"table=staging;jobs", nil, `parameter "table" contains a ";"`},
		{"sslmode=disable&table=staging;jobs", nil, `parameter "table" contains a ";"`},
		{"sslmode=disable;table=x", nil, `parameter "sslmode" contains a ";"`},
		{"table=%zz", nil, `parameter "table" has an invalid %-escape`},
		{"password=se%zzcret", nil, `parameter "password"`},
		{"%zz=1", nil, `parameter "%zz"`},
	}
	for _, tc := range tests {
		got, err := urlquery.Parse(tc.raw)
		if tc.errWant != "" {
			if err == nil || !errors.Is(err, urlquery.ErrBadQuery) || !strings.Contains(err.Error(), tc.errWant) {
				t.Errorf("Parse(%q) = %v, %v; want an ErrBadQuery containing %q", tc.raw, got, err, tc.errWant)
			}
			if err != nil && strings.Contains(err.Error(), "cret") {
				t.Errorf("Parse(%q): the error shows a value: %v", tc.raw, err)
			}
			continue
		}
		if err != nil || got.Encode() != tc.want.Encode() {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.raw, got, err, tc.want)
		}
	}
}

func TestValuesAgreesWithParseQuery(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"a=b", "a=b;c", "a=%", "a=%41", "x&y=", ";"} {
		u := &url.URL{RawQuery: raw}
		_, want := url.ParseQuery(raw)
		if _, err := urlquery.Values(u); (err == nil) != (want == nil) {
			t.Errorf("Values(?%s) error %v, url.ParseQuery error %v: they must refuse the same queries", raw, err, want)
		}
	}
}
