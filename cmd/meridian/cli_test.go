package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql "pgx", to list tables

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
)

// runCLI runs a meridian command line with stdin in (not a terminal) and
// returns its exit code and output.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, stdio{out: &out, errOut: &errOut, in: strings.NewReader(stdin)})
	return code, out.String(), errOut.String()
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		pos  []string
		dsn  string
		json bool
	}{
		{[]string{"retry", "a", "--dsn", "x"}, []string{"retry", "a"}, "x", false},
		{[]string{"--dsn", "x", "retry", "a"}, []string{"retry", "a"}, "x", false},
		{[]string{"retry", "--dsn=x", "a", "b", "--json"}, []string{"retry", "a", "b"}, "x", true},
		{[]string{"retry", "--", "--json", "-x"}, []string{"retry", "--json", "-x"}, "", false},
		{nil, nil, "", false},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		dsn := fs.String("dsn", "", "")
		js := fs.Bool("json", false, "")
		pos, err := parseArgs(fs, c.args)
		if err != nil || !slices.Equal(pos, c.pos) || *dsn != c.dsn || *js != c.json {
			t.Errorf("parseArgs(%q) = %q, %v (dsn %q, json %v); want %q (dsn %q, json %v)", c.args, pos, err, *dsn, *js, c.pos, c.dsn, c.json)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseArgs(fs, []string{"a", "--nope"}); exitCode(err) != exitUsage {
		t.Errorf("an unknown flag gave %v, exit %d; want exit %d", err, exitCode(err), exitUsage)
	}
	if _, err := parseArgs(fs, []string{"a", "-h"}); !errors.Is(err, errHelp) || exitCode(err) != exitOK {
		t.Errorf("-h after an argument gave %v", err)
	}
}

func TestQueueURL(t *testing.T) {
	t.Parallel()
	existing := filepath.Join(t.TempDir(), "jobs")
	if err := os.WriteFile(existing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, want string }{
		{"postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?sslmode=disable"},
		{"sqlite://jobs.db", "sqlite://jobs.db"},
		{"sqlite::memory:", "sqlite::memory:"},
		{"memory://", "memory://"},
		{"root@tcp(127.0.0.1:3306)/test?parseTime=true", "mysql://root@127.0.0.1:3306/test?parseTime=true"},
		{"app:s3cret@tcp(db:3307)/app", "mysql://app:s3cret@db:3307/app"},
		{"data/jobs.db", "sqlite://data/jobs.db"},
		{"/var/lib/app/jobs.sqlite3", "sqlite:///var/lib/app/jobs.sqlite3"},
		{existing, "sqlite://" + existing},
	}
	for _, c := range cases {
		if got, err := queueURL(c.in); err != nil || got != c.want {
			t.Errorf("queueURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	// Queries url.ParseQuery rejects, in every form --dsn takes.
	for _, bad := range []string{
		"postgres://u:s3cret@h/db?table=staging;jobs", "sqlite://jobs.db?table=a;b", "sqlite:jobs.db?table=%zz",
		"app:s3cret@tcp(db:3307)/app?table=staging;jobs", "memory://?retention=1;2",
	} {
		_, err := queueURL(bad)
		if exitCode(err) != exitUsage || !strings.Contains(fmt.Sprint(err), "parameter") {
			t.Errorf("queueURL(%q) = %v; want a usage error naming the parameter", bad, err)
		}
		if strings.Contains(fmt.Sprint(err), "s3cret") {
			t.Errorf("queueURL(%q) error shows the password: %v", bad, err)
		}
	}
	for _, bad := range []string{"", "localhost:5432", "app:s3cret@unix(/tmp/sock)/app", "jobs"} {
		_, err := queueURL(bad)
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "sqlite://PATH") {
			t.Errorf("queueURL(%q) = %v; want a usage error naming the accepted forms", bad, err)
		}
		if strings.Contains(fmt.Sprint(err), "s3cret") {
			t.Errorf("queueURL(%q) error shows the password: %v", bad, err)
		}
	}
}

// Every command answers -h and --help with its usage and exit code 0, and
// so does meridian itself.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for name := range commands {
		for _, h := range []string{"-h", "--help"} {
			code, _, stderr := runCLI(t, "", name, h)
			// bench writes to the process's own stderr.
			if code != exitOK || commands[name].main != nil && !strings.Contains(stderr, "meridian "+name) {
				t.Errorf("meridian %s %s: exit %d, output:\n%s", name, h, code, stderr)
			}
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		if code, out, _ := runCLI(t, "", args...); code != exitOK || !strings.Contains(out, "commands:") {
			t.Errorf("meridian %s: exit %d, output %q", args[0], code, out)
		}
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	missing := "sqlite://" + filepath.Join(t.TempDir(), "missing.db")
	cases := []struct {
		args []string
		want int
	}{
		{nil, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"stats", "--nope"}, exitUsage},
		{[]string{"stats", "--dsn", "somewhere"}, exitUsage},
		{[]string{"failed"}, exitUsage},
		{[]string{"failed", "retry", "--dsn", missing}, exitUsage},
		{[]string{"jobs", "explode", "--dsn", missing}, exitUsage},
		{[]string{"stats", "--dsn", missing}, exitFailure},
		{[]string{"jobs", "show", "x", "--dsn", missing}, exitFailure},
	}
	for _, c := range cases {
		if code, _, stderr := runCLI(t, "", c.args...); code != c.want {
			t.Errorf("meridian %q: exit %d, want %d\n%s", c.args, code, c.want, stderr)
		}
	}
}

// fillSQLite makes a SQLite queue with one dead letter (id deadbeef on
// queue mail) and one ready job, and returns its URL.
func fillSQLite(t *testing.T) string {
	t.Helper()
	dsn := newSQLite(t)
	fill(t, dsn)
	return dsn
}

func fill(t *testing.T, dsn string) {
	t.Helper()
	ctx := t.Context()
	q, err := openQueue(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Push(ctx, queue.Job{ID: "deadbeef", Queue: "mail", Name: "Send", Payload: []byte(`{"to":"ada"}`)}); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Reserve(ctx, []string{"mail"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %v, %v", jobs, err)
	}
	if err := testutil.Fail(ctx, q, jobs[0].Lease(), "smtp: 550 mailbox unavailable"); err != nil {
		t.Fatal(err)
	}
	if err := q.Push(ctx, queue.Job{ID: "cafe", Queue: "mail", Name: "Send", Payload: []byte(`{"to":"bob"}`)}); err != nil {
		t.Fatal(err)
	}
}

// Flags before, between and after the arguments mean the same.
func TestArgumentOrder(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"failed", "retry", "deadbeef", "--dsn", "DSN"},
		{"failed", "--dsn", "DSN", "retry", "deadbeef"},
		{"failed", "retry", "--dsn=DSN", "deadbeef"},
	} {
		dsn := fillSQLite(t)
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "DSN", dsn)
		}
		if code, out, stderr := runCLI(t, "", args...); code != exitOK || out != "retried deadbeef\n" {
			t.Errorf("meridian %q: exit %d, %q\n%s", args, code, out, stderr)
		}
		for _, a := range [][]string{
			{"jobs", "show", "deadbeef", "--dsn", dsn},
			{"jobs", "--dsn", dsn, "list", "--queue", "mail"},
			{"stats", "--dsn", dsn},
		} {
			if code, out, stderr := runCLI(t, "", a...); code != exitOK || !strings.Contains(out, "mail") {
				t.Errorf("meridian %q: exit %d, %q\n%s", a, code, out, stderr)
			}
		}
	}
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	decode := func(args []string, v any) {
		t.Helper()
		code, out, stderr := runCLI(t, "", args...)
		if code != exitOK {
			t.Fatalf("meridian %q: exit %d\n%s", args, code, stderr)
		}
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("meridian %q printed no JSON: %v\n%s", args, err, out)
		}
	}
	var stats []statsJSON
	decode([]string{"stats", "--json", "--dsn", dsn}, &stats)
	if len(stats) != 1 || stats[0].Queue != "mail" || stats[0].Ready.N != 1 || stats[0].Dead.N != 1 {
		t.Errorf("stats --json = %+v", stats)
	}
	var dead []jobJSON
	decode([]string{"failed", "list", "--dsn", dsn, "--json"}, &dead)
	if len(dead) != 1 || dead[0].ID != "deadbeef" || dead[0].State != queue.StateDead || dead[0].LastError != "smtp: 550 mailbox unavailable" || dead[0].Attempts != 1 {
		t.Errorf("failed list --json = %+v", dead)
	}
	var ready []jobJSON
	decode([]string{"jobs", "list", "--json", "--dsn", dsn}, &ready)
	if len(ready) != 1 || ready[0].ID != "cafe" || ready[0].Payload != `{"to":"bob"}` {
		t.Errorf("jobs list --json = %+v", ready)
	}
	var one jobJSON
	decode([]string{"jobs", "show", "deadbeef", "--json", "--dsn", dsn}, &one)
	if one.ID != "deadbeef" || one.State != queue.StateDead || one.FinishedAt == nil {
		t.Errorf("jobs show --json = %+v", one)
	}
	if code, _, stderr := runCLI(t, "", "jobs", "show", "nope", "--dsn", dsn); code != exitFailure || !strings.Contains(stderr, "no job nope") {
		t.Errorf("jobs show of a missing job: exit %d\n%s", code, stderr)
	}
}

// MERIDIAN_DSN stands in for --dsn in every command.
func TestDSNFromEnvironment(t *testing.T) {
	dsn := fillSQLite(t)
	t.Setenv("MERIDIAN_DSN", strings.TrimPrefix(dsn, "sqlite://")) // the plain path form
	for _, args := range [][]string{
		{"stats"}, {"failed", "list"}, {"jobs", "list"}, {"jobs", "show", "cafe"}, {"migrate", "--status"},
	} {
		if code, out, stderr := runCLI(t, "", args...); code != exitOK || out == "" {
			t.Errorf("meridian %q with MERIDIAN_DSN: exit %d, %q\n%s", args, code, out, stderr)
		}
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	dsn := fillSQLite(t)
	// A ";" in a value would drop the parameter (url.URL.Query) and purge
	// meridian_jobs instead of the table named: a usage error instead.
	for _, bad := range []string{dsn + "?table=staging;jobs", dsn + "?table=staging%zz"} {
		if code, out, stderr := runCLI(t, "", "purge", "--all", "--yes", "--dsn", bad); code != exitUsage || !strings.Contains(stderr, `parameter "table"`) {
			t.Errorf("purge --dsn %s: exit %d, %q\n%s", bad, code, out, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "y\n", "purge", "--queue", "mail", "--dsn", dsn); code != exitUsage || !strings.Contains(stderr, "--yes") {
		t.Errorf("purge without --yes and without a terminal: exit %d\n%s", code, stderr)
	}
	ask := func(answer string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(t.Context(), []string{"purge", "--queue", "mail", "--dsn", dsn},
			stdio{out: &out, errOut: &errOut, in: strings.NewReader(answer), inTerminal: true})
		return code, out.String(), errOut.String()
	}
	if code, out, stderr := ask("n\n"); code != exitFailure || out != "" || !strings.Contains(stderr, "[y/N]") {
		t.Errorf("purge answered n: exit %d, %q\n%s", code, out, stderr)
	}
	if code, out, stderr := ask("y\n"); code != exitOK || out != "purged 1 waiting jobs of queue mail\n" {
		t.Errorf("purge answered y: exit %d, %q\n%s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "", "purge", "--all", "--yes", "--dsn", dsn); code != exitOK || out != "purged 0 waiting jobs of every queue\n" {
		t.Errorf("purge --all --yes: exit %d, %q\n%s", code, out, stderr)
	}
	if code, _, _ := runCLI(t, "", "purge", "--yes", "--dsn", dsn); code != exitUsage {
		t.Errorf("purge without --queue or --all: exit %d", code)
	}
	// The dead letter is not waiting: purge leaves it.
	if code, out, _ := runCLI(t, "", "failed", "list", "--dsn", dsn); code != exitOK || !strings.Contains(out, "deadbeef") {
		t.Errorf("purge removed a dead letter:\n%s", out)
	}
}

// readOnlyRuns are the read-only command lines, with DSN for the queue.
var readOnlyRuns = [][]string{
	{"stats", "--dsn", "DSN"},
	{"stats", "--json", "--dsn", "DSN"},
	{"failed", "list", "--dsn", "DSN"},
	{"jobs", "list", "--dsn", "DSN"},
	{"jobs", "show", "x", "--dsn", "DSN"},
	{"dashboard", "--dsn", "DSN", "--addr", "127.0.0.1:0"},
	{"failed", "retry", "x", "--dsn", "DSN"},
	{"purge", "--all", "--yes", "--dsn", "DSN"},
	{"pause", "mail", "--dsn", "DSN"},
	{"resume", "mail", "--dsn", "DSN"},
	{"jobs", "cancel", "x", "--dsn", "DSN"},
	{"periodic", "list", "--dsn", "DSN"},
}

func withDSN(args []string, dsn string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		out[i] = strings.ReplaceAll(a, "DSN", dsn)
	}
	return out
}

// Over a missing SQLite file or an empty one, the commands fail naming what
// they looked for and leave the directory as it was.
func TestReadOnlySQLiteCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// An application's own database, in SQLite's default journal mode.
	other := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE users (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	listing := func() string {
		var b strings.Builder
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				fmt.Fprintf(&b, "%s/\n", p)
				return nil
			}
			data, err := os.ReadFile(p)
			fmt.Fprintf(&b, "%s %x\n", p, sha256.Sum256(data))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	before := listing()
	for _, c := range []struct{ dsn, want string }{
		{"sqlite://" + filepath.Join(dir, "typo.db"), "no SQLite database " + filepath.Join(dir, "typo.db")},
		{filepath.Join(dir, "typo.db"), "no SQLite database"},
		{"sqlite://" + empty, "table meridian_jobs_meta does not exist in " + empty},
		{"sqlite://" + other + "?table=jobs", "table jobs_meta does not exist in " + other},
		{other, "table meridian_jobs_meta does not exist"},
	} {
		for _, args := range readOnlyRuns {
			args := withDSN(args, c.dsn)
			if code, _, stderr := runCLI(t, "", args...); code != exitFailure || !strings.Contains(stderr, c.want) {
				t.Errorf("meridian %q: exit %d, want %d and an error saying %q:\n%s", args, code, exitFailure, c.want, stderr)
			}
		}
	}
	if after := listing(); after != before {
		t.Errorf("read-only commands changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Over a server, a table name with a typo is an error naming the table, and
// the database's table list stays as it was.
func TestReadOnlyServerCreatesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, env, driver, list string
	}{
		{"postgres", "MERIDIAN_POSTGRES_DSN", "pgx", "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"},
		{"mysql", "MERIDIAN_MYSQL_DSN", "mysql", "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, err := sql.Open(c.driver, testutil.DSN(t, c.env))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			tables := func() []string {
				rows, err := db.QueryContext(t.Context(), c.list)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var names []string
				for rows.Next() {
					var n string
					if err := rows.Scan(&n); err != nil {
						t.Fatal(err)
					}
					names = append(names, n)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return names
			}
			dsn := serverURL(t, c.env) // a table of the test's own, never created
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			table := u.Query().Get("table")
			before := tables()
			for _, args := range readOnlyRuns {
				args := withDSN(args, dsn)
				code, _, stderr := runCLI(t, "", args...)
				if code != exitFailure || !strings.Contains(stderr, "table "+table+"_meta does not exist") {
					t.Errorf("meridian %q: exit %d, want %d and an error naming %s_meta:\n%s", args, code, exitFailure, table, stderr)
				}
			}
			// Other helpers' tests create and drop tables meanwhile: only
			// this test's prefix must not appear.
			for _, n := range tables() {
				if strings.HasPrefix(n, table) && !slices.Contains(before, n) {
					t.Errorf("read-only commands created table %s", n)
				}
			}
		})
	}
}

// The commands that take a DSN also take the MySQL driver's own form.
func TestMySQLDriverDSN(t *testing.T) {
	t.Parallel()
	raw := testutil.DSN(t, "MERIDIAN_MYSQL_DSN")
	table := testutil.Name("cli_dsn_")
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	dsn := raw + sep + "table=" + table
	if code, out, stderr := runCLI(t, "", "migrate", "--dsn", dsn); code != exitOK || !strings.Contains(out, "migrated") {
		t.Fatalf("migrate --dsn %s: exit %d, %q\n%s", dsn, code, out, stderr)
	}
	t.Cleanup(func() {
		var out, errOut bytes.Buffer
		if err := migrateMain(context.Background(), []string{"--to", "0", "--yes", "--dsn", dsn}, testIO(&out, &errOut)); err != nil {
			t.Errorf("dropping the test tables: %v", err)
		}
	})
	fill(t, dsn)
	if code, out, stderr := runCLI(t, "", "failed", "list", "--dsn", dsn); code != exitOK || !strings.Contains(out, "deadbeef") {
		t.Errorf("failed list over a MySQL DSN: exit %d, %q\n%s", code, out, stderr)
	}
}

// TestOutputShowsControlCharacters checks that text from the store (a
// job's name, a handler's error, a payload) reaches the terminal with its
// control characters escaped: an escape sequence in a handler's error
// must not recolour, clear or retitle the terminal of whoever lists the
// dead letters.
func TestOutputShowsControlCharacters(t *testing.T) {
	t.Parallel()
	dsn := newSQLite(t)
	ctx := t.Context()
	q, err := openQueue(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	const name, reason = "Send\x1b[2J", "smtp: \x1b]0;pwned\x07\x1b[31mfailed\u009b6n\r"
	if err := q.Push(ctx, queue.Job{ID: "deadbeef", Queue: "mail", Name: name, Payload: []byte("{\"to\":\"\x1b[5m\"}")}); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Reserve(ctx, []string{"mail"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %v, %v", jobs, err)
	}
	if err := testutil.Fail(ctx, q, jobs[0].Lease(), reason); err != nil {
		t.Fatal(err)
	}
	_ = q.Close()
	for _, args := range [][]string{
		{"failed", "list"}, {"failed", "list", "--json"}, {"jobs", "list", "--state", "dead"},
		{"jobs", "show", "deadbeef"}, {"jobs", "show", "deadbeef", "--json"},
	} {
		code, out, stderr := runCLI(t, "", append(args, "--dsn", dsn)...)
		if code != exitOK {
			t.Errorf("meridian %q: exit %d\n%s", args, code, stderr)
		}
		for _, s := range []string{out, stderr} {
			if i := strings.IndexFunc(s, func(r rune) bool {
				return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f
			}); i >= 0 {
				t.Errorf("meridian %q printed a raw control character %q:\n%q", args, s[i], s)
			}
		}
		if !strings.Contains(out, `\u001b`) {
			t.Errorf("meridian %q does not show the escape as \\u001b:\n%s", args, out)
		}
		if strings.HasSuffix(args[len(args)-1], "json") {
			if !json.Valid([]byte(strings.TrimSpace(out))) && !validJSONLines(out) {
				t.Errorf("meridian %q: the output is no longer JSON:\n%s", args, out)
			}
		}
	}
}

// validJSONLines reports whether every non-empty line of s is JSON.
func validJSONLines(s string) bool {
	for line := range strings.SplitSeq(s, "\n") {
		if strings.TrimSpace(line) != "" && !json.Valid([]byte(line)) {
			return false
		}
	}
	return true
}

// testIO is a command's streams in a test: out and errOut, and standard
// input that is no terminal and empty, as under a script.
func testIO(out, errOut io.Writer) stdio {
	return stdio{out: out, errOut: errOut, in: strings.NewReader("")}
}
