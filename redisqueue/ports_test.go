package redisqueue_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// portsEnv names the loopback ports the tests' own redis-server processes
// may listen on, as FIRST-LAST (e.g. 7100-7199, where a machine shares its
// ports out among sessions); unset, they pick in 20000-29999.
const portsEnv = "MERIDIAN_TEST_PORTS"

// handedOut holds the ports freePort returned: a server may not have bound
// its port yet when a parallel test asks for another.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a loopback port in portsEnv's range (default
// 20000-29999) that nothing listens on and that no test of this process
// was given before, picked at random.
func freePort(t *testing.T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	first, last := 20000, 29999
	if r := os.Getenv(portsEnv); r != "" {
		if _, err := fmt.Sscanf(r, "%d-%d", &first, &last); err != nil || first < 1 || last > 65535 || first > last {
			t.Fatalf("%s=%q: want FIRST-LAST, e.g. 7100-7199", portsEnv, r)
		}
	}
	for range 100 {
		p := first + rand.IntN(last-first+1)
		if handedOut.ports[p] {
			continue
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			handedOut.ports[p] = true
			return p
		}
	}
	t.Fatalf("no free port in %d-%d", first, last)
	return 0
}
