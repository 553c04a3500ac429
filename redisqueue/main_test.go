package redisqueue_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, removeFaultWorker, awaitRedials) }

// awaitRedials waits, after every test, for go-redis' background redials
// of nodes the tests killed or never had (a Cluster's dead master, a
// Sentinel at a closed port) to end: once its client is closed a redial
// ends at its next attempt, a second or so apart, and goleak, which runs
// next, would otherwise find it. It waits here, once, rather than in each
// test, because the tests run in parallel and a test cannot tell its own
// redials from another's; one still running after 10 s is goleak's to
// report.
func awaitRedials() {
	testutil.WaitFor(10*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "pool.(*ConnPool).tryDial")
	})
}
