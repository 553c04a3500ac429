package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ServerCPU is a Target that can read its database server's CPU time.
type ServerCPU interface {
	// ServerCPU returns the CPU time (user and system) the server's
	// processes have used so far, and false when it cannot be read (a
	// server on another machine, or no /proc).
	ServerCPU() (time.Duration, bool)
}

// cpuMark is the CPU time of this process, and of the database server
// when known, at the start of a measured phase.
type cpuMark struct {
	client, server time.Duration
	hasClient      bool
	hasServer      bool
	serverCPU      func() (time.Duration, bool)
}

// startCPU marks the CPU time used so far.
func (o Options) startCPU() cpuMark {
	m := cpuMark{serverCPU: o.ReadServerCPU}
	m.client, m.hasClient = ProcessCPU()
	if o.ReadServerCPU != nil {
		m.server, m.hasServer = o.ReadServerCPU()
	}
	return m
}

// figures returns the CPU used since the mark per 1,000 of jobs: the
// client's (this process: the harness's producers and workers) and the
// server's, each when it could be read at both ends.
func (m cpuMark) figures(phase string, jobs int) []Figure {
	var out []Figure
	per := func(d time.Duration) float64 { return ms(d) * 1000 / float64(max(jobs, 1)) }
	if c, ok := ProcessCPU(); ok && m.hasClient {
		out = append(out, Figure{Name: phase + ": client CPU per 1,000 jobs", Value: per(c - m.client), Unit: Milliseconds})
	}
	if m.hasServer {
		if s, ok := m.serverCPU(); ok {
			out = append(out, Figure{Name: phase + ": server CPU per 1,000 jobs", Value: per(s - m.server), Unit: Milliseconds})
		}
	}
	return out
}

// ProcessesCPU returns the CPU time (user and system) used so far by
// every process on this machine whose command name is one of names, with
// the time of their children that ended, read from /proc; false when
// /proc cannot be read or no such process runs. The children's time keeps
// the sum from falling when a server's backend exits: its time moves to
// the server's main process, which reaped it. Other users of the same
// server are counted too.
func ProcessesCPU(names ...string) (time.Duration, bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return 0, false
	}
	var ticks int64
	found := false
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended
		}
		t, name, err := parseStat(string(b))
		if err != nil {
			continue
		}
		for _, n := range names {
			if name == n {
				ticks += t
				found = true
			}
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, found
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times: 100 on every Linux architecture Go supports.
const clockTicks = 100

// parseStat returns utime+stime+cutime+cstime (in clock ticks) and the
// command name of one /proc/<pid>/stat line.
func parseStat(s string) (int64, string, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, "", fmt.Errorf("bench: malformed /proc stat %q", s)
	}
	name := s[open+1 : end]
	// After the name: state (field 3) ... utime is field 14, stime 15,
	// cutime 16, cstime 17.
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return 0, "", fmt.Errorf("bench: short /proc stat %q", s)
	}
	var sum int64
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, "", fmt.Errorf("bench: malformed /proc stat times in %q", s)
		}
		sum += n
	}
	return sum, name, nil
}
