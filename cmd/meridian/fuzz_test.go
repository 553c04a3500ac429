package main

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzQueueURL checks --dsn parsing on any text: it never panics, a refusal
// is a usage error (exit 2), an accepted value is a URL whose query
// url.ParseQuery reads whole (none of its parameters would be dropped on
// the way to the driver), and a password in a refused MySQL DSN never
// reaches the message.
func FuzzQueueURL(f *testing.F) {
	for _, seed := range []string{
		"postgres://u:pw@h:5432/db?sslmode=disable", "sqlite://jobs.db", "sqlite::memory:", "memory://", "jobs.db",
		"root@tcp(127.0.0.1:3306)/test?parseTime=true", "app:secretpw@tcp(db:3306)/app", "app:secretpw@unix(/tmp/s)/app",
		"tcp(", "@tcp(", ":@tcp()/", "x", "", "user:secretpw@tcp(h:1)/db?%zz", "a.sqlite3",
		"sqlite://jobs.db?table=staging;jobs", "postgres://u@h/db?table=a%3Bb", "memory://?retention=1;2",
		"root@tcp(h:1)/db?table=staging;jobs&parseTime=true", "sqlite:jobs.db?table=%zz&setup=false",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		u, err := queueURL(dsn)
		if err != nil {
			if exitCode(err) != exitUsage {
				t.Fatalf("queueURL(%q) failed with exit %d, want %d: %v", dsn, exitCode(err), exitUsage, err)
			}
			if user, rest, ok := strings.Cut(dsn, ":"); ok && !strings.Contains(dsn, "://") {
				if pw, _, ok := strings.Cut(rest, "@"); ok && len(pw) >= 4 && !strings.Contains(user+"@", pw) &&
					!strings.Contains(strings.Replace(dsn, pw, "", 1), pw) && strings.Contains(err.Error(), pw) {
					t.Fatalf("queueURL(%q): the error shows the password: %v", dsn, err)
				}
			}
			return
		}
		pu, perr := url.Parse(u)
		if perr != nil {
			if !strings.HasPrefix(u, "sqlite:") {
				t.Fatalf("queueURL(%q) = %q, which does not parse as a URL: %v", dsn, u, perr)
			}
			return
		}
		if _, qerr := url.ParseQuery(pu.RawQuery); qerr != nil {
			t.Fatalf("queueURL(%q) = %q, whose query url.URL.Query would cut short: %v", dsn, u, qerr)
		}
	})
}
