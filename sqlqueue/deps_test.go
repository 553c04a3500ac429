package sqlqueue_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goListDeps lists the packages pkg links.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

func hasPrefix(deps []string, prefix string) bool {
	return slices.ContainsFunc(deps, func(d string) bool { return strings.HasPrefix(d, prefix) })
}

// TestDepsSQLiteOnly checks that a SQLite-only program links neither pgx
// nor the MySQL driver, and that the core links no database driver at all
// (sqlx, which the core uses for rebinding, IN lists and struct scans, is
// no driver).
func TestDepsSQLiteOnly(t *testing.T) {
	t.Parallel()
	prog := goListDeps(t, "./testdata/sqliteonly")
	if !hasPrefix(prog, "modernc.org/sqlite") || !slices.Contains(prog, "github.com/meridianjobs/meridian/sqlqueue") {
		t.Fatalf("the SQLite-only program does not link sqlqueue and modernc.org/sqlite: %v", prog)
	}
	for _, banned := range []string{"github.com/jackc/pgx", "github.com/go-sql-driver/mysql", "github.com/lib/pq"} {
		if hasPrefix(prog, banned) {
			t.Errorf("the SQLite-only program links %s", banned)
		}
	}
	core := goListDeps(t, ".")
	for _, banned := range []string{"github.com/jackc/pgx", "github.com/go-sql-driver/mysql", "modernc.org/sqlite"} {
		if hasPrefix(core, banned) {
			t.Errorf("the sqlqueue core links %s", banned)
		}
	}
}
