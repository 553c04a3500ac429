package urlquery

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrBadQuery marks a URL query that url.ParseQuery rejects: a parameter
// with a ";" or an invalid %-escape. Values wraps it.
var ErrBadQuery = errors.New("malformed URL query")

// Values returns the parameters of u's query, as u.Query does, or an error
// wrapping ErrBadQuery when url.ParseQuery rejects any part of it, instead
// of dropping that part. The error names the offending parameter by its
// key (never its value, which may be a password) and how to write it.
func Values(u *url.URL) (url.Values, error) {
	return Parse(u.RawQuery)
}

// Parse is Values for a raw query (the text after "?").
func Parse(rawQuery string) (url.Values, error) {
	v, err := url.ParseQuery(rawQuery)
	if err == nil {
		return v, nil
	}
	for part := range strings.SplitSeq(rawQuery, "&") {
		if part == "" {
			continue
		}
		if _, perr := url.ParseQuery(part); perr == nil {
			continue
		}
		key, _, _ := strings.Cut(part, "=")
		if strings.Contains(part, ";") {
			return nil, fmt.Errorf("%w: parameter %s contains a \";\", which is not a separator: write it as %%3B in a value or use \"&\" between parameters",
				ErrBadQuery, quoteKey(key))
		}
		return nil, fmt.Errorf("%w: parameter %s has an invalid %%-escape: write a literal %% as %%25", ErrBadQuery, quoteKey(key))
	}
	return nil, fmt.Errorf("%w: %v", ErrBadQuery, err)
}

// quoteKey quotes a parameter's key for an error, cut to a readable length
// and up to a ";" (a key with one is its own mistake).
func quoteKey(key string) string {
	if k, _, ok := strings.Cut(key, ";"); ok {
		key = k
	}
	const maxLen = 40
	if len(key) > maxLen {
		key = key[:maxLen] + "..."
	}
	return fmt.Sprintf("%q", key)
}
