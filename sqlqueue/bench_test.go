package sqlqueue_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	queue "github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// eachDialectB runs fn as a sub-benchmark per dialect whose server is
// available, on a fresh table.
func eachDialectB(b *testing.B, fn func(b *testing.B, q queue.Queue)) {
	for _, d := range []string{"sqlite", "postgres", "mysql"} {
		b.Run(d, func(b *testing.B) {
			var be backend
			switch d {
			case "sqlite":
				be = sqliteBackend()
			case "postgres":
				be = serverBackend(b, "postgres", "pgx", "MERIDIAN_POSTGRES_DSN")
			case "mysql":
				be = serverBackend(b, "mysql", "mysql", "MERIDIAN_MYSQL_DSN")
			}
			fn(b, newStore(b, be).queue(b))
		})
	}
}

// BenchmarkPushMany measures DispatchMany's path: batches of 1,000 jobs,
// one multi-row INSERT each.
func BenchmarkPushMany(b *testing.B) {
	eachDialectB(b, func(b *testing.B, q queue.Queue) {
		bp := q.(queue.BatchPusher)
		batch := make([]queue.Job, 1000)
		for b.Loop() {
			for i := range batch {
				batch[i] = queue.Job{ID: queue.NewID(), Name: "bench", Payload: []byte(`{"n":1}`)}
			}
			if _, err := bp.PushMany(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "jobs/s")
	})
}

// BenchmarkReserveAckMany measures the worker's database work per batch of
// 100 jobs: one Reserve and one Complete of their acks.
func BenchmarkReserveAckMany(b *testing.B) {
	eachDialectB(b, func(b *testing.B, q queue.Queue) {
		const batch = 100
		bp := q.(queue.BatchPusher)
		fill := func() {
			jobs := make([]queue.Job, 2000)
			for i := range jobs {
				jobs[i] = queue.Job{ID: queue.NewID(), Name: "bench", Payload: []byte(fmt.Sprint(i))}
			}
			if _, err := bp.PushMany(b.Context(), jobs); err != nil {
				b.Fatal(err)
			}
		}
		fill()
		left := 2000
		for b.Loop() {
			if left < batch {
				b.StopTimer()
				fill()
				left += 2000
				b.StartTimer()
			}
			jobs, err := q.Reserve(b.Context(), nil, batch, time.Minute)
			if err != nil || len(jobs) != batch {
				b.Fatalf("Reserve = %d, %v", len(jobs), err)
			}
			outs := make([]queue.Completion, len(jobs))
			for i, j := range jobs {
				outs[i] = queue.Completion{Lease: j.Lease(), Outcome: queue.OutcomeDone}
			}
			if _, errs, err := q.Complete(b.Context(), nil, outs); err != nil || errors.Join(errs...) != nil {
				b.Fatalf("Complete = %v, %v", errs, err)
			}
			left -= batch
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
	})
}

// BenchmarkNack measures a failed attempt's path, one Nack per job (the
// Worker's retry of a job whose handler failed): one UPDATE, which the
// update trigger counts only if it moves the job into a scheduled bucket.
// The fill and Reserve are outside the timer.
func BenchmarkNack(b *testing.B) {
	eachDialectB(b, func(b *testing.B, q queue.Queue) {
		bp := q.(queue.BatchPusher)
		var held []queue.Job
		for b.Loop() {
			if len(held) == 0 {
				b.StopTimer()
				jobs := make([]queue.Job, 500)
				for i := range jobs {
					jobs[i] = queue.Job{ID: queue.NewID(), Name: "bench"}
				}
				if _, err := bp.PushMany(b.Context(), jobs); err != nil {
					b.Fatal(err)
				}
				var err error
				if held, err = q.Reserve(b.Context(), nil, len(jobs), time.Hour); err != nil || len(held) != len(jobs) {
					b.Fatalf("Reserve = %d, %v", len(held), err)
				}
				b.StartTimer()
			}
			if err := testutil.Nack(b.Context(), q, held[0].Lease(), time.Now().Add(time.Hour), "boom"); err != nil {
				b.Fatal(err)
			}
			held = held[1:]
		}
	})
}

// BenchmarkAckManyCounts measures what the counts cost a batch ack of
// 1,000 jobs (the burn-down's hot statement), on SQLite and MySQL/MariaDB,
// whose triggers are row triggers (a counter upsert per deleted job, but
// on MariaDB, whose ack counts its own deletions in one upsert): as
// shipped, and with the triggers dropped (no counting at all).
// Reserve and the fill are outside the timer.
func BenchmarkAckManyCounts(b *testing.B) {
	for _, variant := range []string{"shipped", "no-triggers"} {
		b.Run(variant, func(b *testing.B) {
			// Not PostgreSQL: its triggers are statement triggers.
			for _, d := range []sqlqueue.Dialect{sqlqueue.SQLite, sqlqueue.MySQL} {
				b.Run(string(d), func(b *testing.B) {
					be := sqliteBackend()
					if d == sqlqueue.MySQL {
						be = serverBackend(b, sqlqueue.MySQL, "mysql", "MERIDIAN_MYSQL_DSN")
					}
					s := newStore(b, be)
					q, db := s.open(b)
					var setup []string
					if variant == "no-triggers" {
						setup = []string{`DROP TRIGGER IF EXISTS %[1]s_count_del`, `DROP TRIGGER IF EXISTS %[1]s_count_upd`, `DROP TRIGGER IF EXISTS %[1]s_count_ins`}
					}
					for _, stmt := range setup {
						if _, err := db.ExecContext(b.Context(), fmt.Sprintf(stmt, s.table)); err != nil {
							b.Fatal(err)
						}
					}
					if d == sqlqueue.MySQL {
						// One connection, so that its session counters
						// (handlerOps) see every statement.
						db.SetMaxOpenConns(1)
					}
					const batch = 1000
					jobs := make([]queue.Job, batch)
					var cpu, srv time.Duration
					var ops int64
					srvRead := false
					for b.Loop() {
						b.StopTimer()
						for i := range jobs {
							jobs[i] = queue.Job{ID: queue.NewID(), Name: "bench", Payload: []byte(`{"n":1}`)}
						}
						if _, err := q.PushMany(b.Context(), jobs); err != nil {
							b.Fatal(err)
						}
						got, err := q.Reserve(b.Context(), nil, batch, time.Minute)
						if err != nil || len(got) != batch {
							b.Fatalf("Reserve = %d, %v", len(got), err)
						}
						leases := make([]queue.Lease, len(got))
						for i, j := range got {
							leases[i] = j.Lease()
						}
						ops0 := handlerOps(b, db, d)
						srv0, srvOK := serverThreadCPU(b, db, d)
						cpu0 := processCPU(b)
						b.StartTimer()
						if lost, err := testutil.AckMany(b.Context(), q, leases); err != nil || len(lost) != 0 {
							b.Fatalf("AckMany = %v, %v", lost, err)
						}
						b.StopTimer()
						cpu += processCPU(b) - cpu0
						if srv1, ok := serverThreadCPU(b, db, d); ok && srvOK {
							srv += srv1 - srv0
							srvRead = true
						}
						ops += handlerOps(b, db, d) - ops0
						b.StartTimer()
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "us/job")
					b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*batch), "client-cpu-us/job")
					if d == sqlqueue.MySQL {
						b.ReportMetric(float64(ops)/float64(b.N*batch), "handler-ops/job")
					}
					if srvRead {
						b.ReportMetric(float64(srv.Microseconds())/float64(b.N*batch), "server-cpu-us/job")
					}
				})
			}
		})
	}
}

// processCPU is this process's CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// handlerOps is the sum of the storage-engine row operations
// (Handler_* session counters) of db's one connection on MySQL/MariaDB:
// how much row work the statements did, whatever the load.
func handlerOps(b *testing.B, db *sql.DB, d sqlqueue.Dialect) int64 {
	if d != sqlqueue.MySQL {
		return 0
	}
	rows, err := db.QueryContext(b.Context(), "SHOW SESSION STATUS LIKE 'Handler%'")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			b.Fatal(err)
		}
		sum += n
	}
	return sum
}

// serverThreadCPU is the CPU time of the MariaDB server thread that serves
// db's one connection (information_schema.PROCESSLIST's TID, read from
// /proc: the server must run on this machine), in clock ticks of 10 ms, so
// only a sum over many calls means anything. false when it cannot be read.
func serverThreadCPU(b *testing.B, db *sql.DB, d sqlqueue.Dialect) (time.Duration, bool) {
	if d != sqlqueue.MySQL {
		return 0, false
	}
	var tid int64
	if err := db.QueryRowContext(b.Context(), "SELECT TID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()").Scan(&tid); err != nil {
		return 0, false
	}
	matches, _ := filepath.Glob("/proc/[0-9]*/task/" + strconv.FormatInt(tid, 10) + "/stat")
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		s := string(data)
		if !strings.Contains(s, "(mariadbd)") && !strings.Contains(s, "(mysqld)") {
			continue
		}
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * 10 * time.Millisecond, true
	}
	return 0, false
}

// BenchmarkClaimScheduled measures a claim on a queue with 100,000 jobs
// scheduled an hour or more ahead (issue 32 item 3): "idle" claims 10
// from a queue with nothing due (every poll of an idle queue), "below"
// claims and acks 100 due jobs of priority 0 while the scheduled ones
// have priority 5. A claim that orders over every priority at once read
// all of them each time; one priority at a time it reads the due jobs.
func BenchmarkClaimScheduled(b *testing.B) {
	const scheduled = 100_000
	for _, mode := range []string{"idle", "below"} {
		b.Run(mode, func(b *testing.B) {
			eachDialectB(b, func(b *testing.B, q queue.Queue) {
				bp := q.(queue.BatchPusher)
				push := func(n, prio int, at time.Time) {
					jobs := make([]queue.Job, 0, 1000)
					for i := range n {
						jobs = append(jobs, queue.Job{ID: queue.NewID(), Name: "bench", Payload: []byte("{}"), Priority: prio, AvailableAt: at.Add(time.Duration(i) * time.Millisecond)})
						if len(jobs) == cap(jobs) || i == n-1 {
							if _, err := bp.PushMany(b.Context(), jobs); err != nil {
								b.Fatal(err)
							}
							jobs = jobs[:0]
						}
					}
				}
				prio := 0
				if mode == "below" {
					prio = 5
				}
				push(scheduled, prio, time.Now().Add(time.Hour))
				const batch = 100
				left := 0
				for b.Loop() {
					if mode == "idle" {
						if jobs, err := q.Reserve(b.Context(), nil, 10, time.Minute); err != nil || len(jobs) != 0 {
							b.Fatalf("Reserve = %d, %v", len(jobs), err)
						}
						continue
					}
					if left < batch {
						b.StopTimer()
						push(2000, 0, time.Now().Add(-time.Minute))
						left += 2000
						b.StartTimer()
					}
					jobs, err := q.Reserve(b.Context(), nil, batch, time.Minute)
					if err != nil || len(jobs) != batch {
						b.Fatalf("Reserve = %d, %v", len(jobs), err)
					}
					outs := make([]queue.Completion, len(jobs))
					for i, j := range jobs {
						outs[i] = queue.Completion{Lease: j.Lease(), Outcome: queue.OutcomeDone}
					}
					if _, errs, err := q.Complete(b.Context(), nil, outs); err != nil || errors.Join(errs...) != nil {
						b.Fatalf("Complete = %v, %v", errs, err)
					}
					left -= batch
				}
			})
		})
	}
}
