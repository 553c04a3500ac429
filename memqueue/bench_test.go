package memqueue_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

var benchPayload = []byte(`{"user_id":42}`)

// BenchmarkPushReserveAck measures one job's trip through the queue: Push,
// Reserve of one job, Ack. It reports jobs/s.
func BenchmarkPushReserveAck(b *testing.B) {
	ctx := context.Background()
	q := memqueue.New()
	qs := []string{queue.DefaultQueue}
	b.ReportAllocs()
	for b.Loop() {
		if err := q.Push(ctx, queue.Job{ID: driver.NewID(), Name: "bench", Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
		jobs, err := q.Reserve(ctx, qs, 1, time.Minute)
		if err != nil || len(jobs) != 1 {
			b.Fatal(len(jobs), err)
		}
		if err := testutil.Ack(ctx, q, jobs[0].Lease()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkBatch measures the batched path the worker uses: PushMany of
// 100 jobs, Reserve of 100, one Complete of their 100 acks. It reports
// jobs/s.
func BenchmarkBatch(b *testing.B) {
	const batch = 100
	ctx := context.Background()
	q := memqueue.New()
	qs := []string{queue.DefaultQueue}
	jobs := make([]queue.Job, batch)
	outs := make([]driver.Completion, batch)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for i := range jobs {
			jobs[i] = queue.Job{ID: driver.NewID(), Name: "bench", Payload: benchPayload}
		}
		if _, err := q.PushMany(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		got, err := q.Reserve(ctx, qs, batch, time.Minute)
		if err != nil || len(got) != batch {
			b.Fatal(len(got), err)
		}
		for i, j := range got {
			outs[i] = driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone}
		}
		if _, errs, err := q.Complete(ctx, nil, outs); err != nil || errors.Join(errs...) != nil {
			b.Fatal(errs, err)
		}
		n += batch
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkPushDeep measures Push onto a queue already holding 1,000,000
// ready jobs (heap depth), with priorities spread.
func BenchmarkPushDeep(b *testing.B) {
	ctx := context.Background()
	q := memqueue.New()
	for i := range 1_000_000 {
		_ = q.Push(ctx, queue.Job{ID: driver.NewID(), Priority: i % 5, Payload: benchPayload})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := q.Push(ctx, queue.Job{ID: driver.NewID(), Priority: i % 5, Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParallel measures Push, Reserve and Ack from GOMAXPROCS
// goroutines contending for the one mutex.
func BenchmarkParallel(b *testing.B) {
	ctx := context.Background()
	q := memqueue.New()
	qs := []string{queue.DefaultQueue}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := q.Push(ctx, queue.Job{ID: driver.NewID(), Payload: benchPayload}); err != nil {
				b.Error(err)
				return
			}
			jobs, err := q.Reserve(ctx, qs, 1, time.Minute)
			if err != nil {
				b.Error(err)
				return
			}
			for _, j := range jobs {
				if err := testutil.Ack(ctx, q, j.Lease()); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}

// BenchmarkBurnDown measures Reserve and AckMany in batches of 100 from a
// queue holding b.N ready jobs pushed beforehand (untimed), as the
// worker's burn-down benchmark does. It reports jobs/s.
func BenchmarkBurnDown(b *testing.B) {
	const batch = 100
	ctx := context.Background()
	q := memqueue.New()
	qs := []string{queue.DefaultQueue}
	jobs := make([]queue.Job, b.N)
	for i := range jobs {
		jobs[i] = queue.Job{ID: driver.NewID(), Name: "bench", Payload: benchPayload}
	}
	if _, err := q.PushMany(ctx, jobs); err != nil {
		b.Fatal(err)
	}
	outs := make([]driver.Completion, 0, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		got, err := q.Reserve(ctx, qs, batch, time.Minute)
		if err != nil || len(got) == 0 {
			b.Fatal(len(got), err)
		}
		outs = outs[:0]
		for _, j := range got {
			outs = append(outs, driver.Completion{Lease: j.Lease(), Outcome: driver.OutcomeDone})
		}
		if _, errs, err := q.Complete(ctx, nil, outs); err != nil || errors.Join(errs...) != nil {
			b.Fatal(errs, err)
		}
		done += len(got)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkHeldPerQueuedJob measures the heap a queue holds per queued
// job: each iteration queues 10,000 jobs shaped as the bench harness's
// (a new ID, a name, a two-byte JSON payload) with PushMany, and the heap
// in use after a GC, less the heap before, is divided by the jobs queued.
// It reports B/queued-job.
func BenchmarkHeldPerQueuedJob(b *testing.B) {
	const chunk = 10_000
	ctx := context.Background()
	q := memqueue.New()
	payload := []byte(`{}`)
	jobs := make([]queue.Job, chunk)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n := 0
	for b.Loop() {
		for i := range jobs {
			jobs[i] = queue.Job{ID: driver.NewID(), Name: "meridian_bench", Payload: payload}
		}
		if _, err := q.PushMany(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		n += chunk
	}
	clear(jobs)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/queued-job")
	runtime.KeepAlive(q)
}
