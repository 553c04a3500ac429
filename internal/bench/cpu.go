package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// NodesCPU is a Target whose store runs as several server processes that
// share the work (a Redis Cluster's masters) and can read each one's CPU
// time: the burn-down and the continuous mode then also report the CPU
// per job of the busiest and of the least busy node, and their mean.
type NodesCPU interface {
	// NodesCPU returns the CPU time (user and system) each node has used
	// so far, by node, and false when it cannot be read.
	NodesCPU() (map[string]time.Duration, bool)
}

// cpuMark is the CPU time of this process, and of the database server
// (and of its nodes) when known, at the start of a measured phase.
type cpuMark struct {
	client, server time.Duration
	hasClient      bool
	hasServer      bool
	serverCPU      func() (time.Duration, bool)
	nodes          map[string]time.Duration
	nodesCPU       func() (map[string]time.Duration, bool)
}

// startCPU marks the CPU time used so far.
func (o Options) startCPU() cpuMark {
	m := cpuMark{serverCPU: o.ReadServerCPU, nodesCPU: o.ReadNodesCPU}
	m.client, m.hasClient = ProcessCPU()
	if o.ReadServerCPU != nil {
		m.server, m.hasServer = o.ReadServerCPU()
	}
	if o.ReadNodesCPU != nil {
		if n, ok := o.ReadNodesCPU(); ok {
			m.nodes = n
		}
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
			if used := (s - m.server).Seconds(); used > 0 {
				// The sizing model: the jobs one server core carries,
				// had it nothing else to do (a Redis master is one
				// core's worth: its scripts run on one thread).
				out = append(out, Figure{Name: phase + ": jobs per server core-second", Value: float64(jobs) / used, Unit: PerCoreSecond})
			}
		}
	}
	if len(m.nodes) > 1 {
		if now, ok := m.nodesCPU(); ok {
			out = append(out, nodeFigures(phase, jobs, m.nodes, now)...)
		}
	}
	return out
}

// nodeFigures returns the CPU per 1,000 jobs of the busiest node and of
// the least busy one between the two readings, and the nodes' mean; a node
// in one reading only is left out.
func nodeFigures(phase string, jobs int, before, after map[string]time.Duration) []Figure {
	var used []time.Duration
	for addr, a := range after {
		if b, ok := before[addr]; ok {
			used = append(used, a-b)
		}
	}
	if len(used) == 0 {
		return nil
	}
	per := func(d time.Duration) float64 { return ms(d) * 1000 / float64(max(jobs, 1)) }
	var sum time.Duration
	for _, d := range used {
		sum += d
	}
	n := len(used)
	return []Figure{
		{Name: fmt.Sprintf("%s: server CPU per 1,000 jobs per master, mean of %d", phase, n), Value: per(sum / time.Duration(n)), Unit: Milliseconds},
		{Name: fmt.Sprintf("%s: server CPU per 1,000 jobs, busiest of %d masters", phase, n), Value: per(slices.Max(used)), Unit: Milliseconds},
		{Name: fmt.Sprintf("%s: server CPU per 1,000 jobs, least busy of %d masters", phase, n), Value: per(slices.Min(used)), Unit: Milliseconds},
	}
}

// TreeCPU returns the CPU time (user and system) used so far by the
// process root, with the time of its children that ended, and by its
// living children, read from /proc; false when root's /proc entry cannot
// be read (no /proc, or root has ended). The time of a child that ends
// moves into root's children's time when root reaps it, so the sum never
// falls while root lives (PostgreSQL's postmaster reaps its backends).
//
// The children are read between two readings of root: a child reaped
// in between is in neither the first reading nor the scan, and read in
// that order alone its time would vanish (a burn-down once measured a
// negative server CPU while other tests' backends came and went). When
// root's time moved during the scan the reading is taken again; if it
// keeps moving, root's second reading is used, which may count a child
// twice but never loses one.
func TreeCPU(root int) (time.Duration, bool) {
	var ticks int64
	for range 10 {
		before, ok := ownTicks(root)
		if !ok {
			return 0, false
		}
		children := childTicks(root)
		after, ok := ownTicks(root)
		if !ok {
			return 0, false
		}
		ticks = after + children
		if after == before {
			break
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// ownTicks returns the time of process pid and of its reaped children,
// in clock ticks; false when it cannot be read.
func ownTicks(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	st, err := parseStat(string(b))
	if err != nil {
		return 0, false
	}
	return st.ticks, true
}

// childTicks returns the time of root's living children (and of their
// reaped children), in clock ticks.
func childTicks(root int) int64 {
	var ticks int64
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended
		}
		if c, err := parseStat(string(b)); err == nil && c.ppid == root {
			ticks += c.ticks
		}
	}
	return ticks
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times: 100 on every Linux architecture Go supports.
const clockTicks = 100

// procStat is what the harness reads of one /proc/<pid>/stat line.
type procStat struct {
	ticks int64  // utime+stime+cutime+cstime, in clock ticks
	name  string // the command name
	ppid  int    // the parent's process ID
}

// parseStat reads one /proc/<pid>/stat line.
func parseStat(s string) (procStat, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("bench: malformed /proc stat %q", s)
	}
	st := procStat{name: s[open+1 : end]}
	// After the name: state (field 3), ppid (4) ... utime is field 14,
	// stime 15, cutime 16, cstime 17.
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("bench: short /proc stat %q", s)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("bench: malformed /proc stat parent in %q", s)
	}
	st.ppid = ppid
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("bench: malformed /proc stat times in %q", s)
		}
		st.ticks += n
	}
	return st, nil
}
