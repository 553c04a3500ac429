package observe_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func goListDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %v: %v\n%s", pkgs, err, out)
	}
	return strings.Fields(string(out))
}

func links(deps []string, prefix string) bool {
	return slices.ContainsFunc(deps, func(d string) bool { return strings.HasPrefix(d, prefix) })
}

const (
	prom = "github.com/prometheus/"
	otel = "go.opentelemetry.io/"
)

// TestDepsStayOptional checks that a program using the queue, a driver, the
// dashboard, the alerts or the test helpers links neither Prometheus nor
// OpenTelemetry, and that each observe package links only its own.
func TestDepsStayOptional(t *testing.T) {
	t.Parallel()
	core := goListDeps(t, "../queue", "../memqueue", "../sqlqueue/...", "../dashboard/...", "../queuetest", "./alert")
	for _, banned := range []string{prom, otel} {
		if links(core, banned) {
			t.Errorf("the queue, drivers, dashboard, queuetest or alert link %s", banned)
		}
	}
	if p := goListDeps(t, "./promqueue"); !links(p, prom) || links(p, otel) {
		t.Errorf("promqueue should link Prometheus and not OpenTelemetry")
	}
	if o := goListDeps(t, "./otelqueue"); !links(o, otel) || links(o, prom) {
		t.Errorf("otelqueue should link OpenTelemetry and not Prometheus")
	}
}
