package browsertest_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meridianjobs/meridian/dashboard"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Jobs of the screenshot's workload.
type (
	SendEmail   struct{ N int }
	ChargeCard  struct{ N int }
	BuildReport struct{ N int }
	PostWebhook struct{ N int }
)

// TestBrowserScreenshot renders the overview over a SQLite queue with a
// working mix (several queues, retries, dead letters, jobs scheduled
// ahead, a queue no worker serves) and checks the capture is a real page,
// not a blank or error one. With MERIDIAN_SCREENSHOT=path it writes the
// PNG there: docs/dashboard.png, shown by the README, is made with
//
//	cd dashboard/browsertest && MERIDIAN_SCREENSHOT=$PWD/../../docs/dashboard.png go test -run Screenshot
func TestBrowserScreenshot(t *testing.T) {
	ctx := browser(t)
	q := openSQLite(t)
	bg := t.Context()

	w := queue.NewWorker(q).Queues("default", "emails", "billing", "reports").
		Concurrency(4).MaxAttempts(2).Backoff(10 * time.Millisecond).Poll(20 * time.Millisecond).
		Slog(slog.New(slog.NewTextHandler(io.Discard, nil)))
	queue.Handle(w, func(context.Context, SendEmail) error { return nil })
	queue.Handle(w, func(_ context.Context, c ChargeCard) error {
		if c.N%7 == 0 {
			return errors.New("card declined: insufficient funds")
		}
		return nil
	})
	queue.Handle(w, func(ctx context.Context, _ BuildReport) error {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	runDone := make(chan error, 1)
	wctx, stop := context.WithCancel(bg)
	go func() { runDone <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		<-runDone
	})

	for n := range 300 {
		must(t, queue.Dispatch(bg, q, SendEmail{N: n}, queue.OnQueue("emails")))
		must(t, queue.Dispatch(bg, q, ChargeCard{N: n}, queue.OnQueue("billing")))
		if n%5 == 0 {
			must(t, queue.Dispatch(bg, q, BuildReport{N: n}, queue.OnQueue("reports")))
			must(t, queue.Dispatch(bg, q, BuildReport{N: n}, queue.Delay(3*time.Hour), queue.OnQueue("reports")))
		}
		must(t, queue.Dispatch(bg, q, PostWebhook{N: n}, queue.OnQueue("webhooks"))) // nobody serves it
	}
	// Wait until the worker has been through its queues, so the figures
	// show throughput and the failed list has the declined cards.
	in := q.(driver.Inspector)
	for {
		page, err := in.ListJobs(bg, driver.JobFilter{State: queue.StateReady, Queue: "billing", Limit: 1})
		must(t, err)
		if len(page.Jobs) == 0 {
			break
		}
		select {
		case <-bg.Done():
			t.Fatal("the worker did not drain billing")
		case <-time.After(50 * time.Millisecond):
		}
	}

	s := serve(t, dashboard.ForQueue(q), dashboard.RefreshInterval(time.Hour))
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 860),
		chromedp.Navigate(s.url("")),
		chromedp.WaitVisible(chromedp.CSS(`#queues`)),
	); err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	checkCapture(t, shot, 1280, 860)
	if path := os.Getenv("MERIDIAN_SCREENSHOT"); path != "" {
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}

// checkCapture fails t unless b is a w x h PNG with the variety of a
// rendered page (a blank or single-colour capture has a handful of colours).
func checkCapture(t *testing.T, b []byte, w, h int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the capture is not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{w, h}) {
		t.Fatalf("the capture is %v, want %dx%d", got, w, h)
	}
	colours := map[color.RGBA]bool{}
	for y := 0; y < h; y += 3 {
		for x := 0; x < w; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 255}] = true
		}
	}
	if len(colours) < 64 {
		t.Fatalf("the capture has %d colours: a blank or broken page", len(colours))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
