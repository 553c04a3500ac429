package dashboard

import (
	"sync"
	"time"
)

// ThroughputSample is one reading of a queue's processed counter.
type ThroughputSample struct {
	At        time.Time
	Processed int64   // the queue's Processed figure at At
	Rate      float64 // jobs per minute since the previous sample
}

// Sampler derives a jobs-per-minute rate per queue over a sliding window by
// reading an Inspector's Stats every interval in one background goroutine.
// Rates come from the differences of QueueStats.Processed, which is a
// running total in cookbook mode; a counter that goes down (a restart)
// starts the queue's window afresh. In driver mode QueueStats already
// carries JobsPerMinute and the dashboard charts come from the driver, so a
// Sampler is not needed there.
//
// Start it once and Stop it when done; its methods are safe for concurrent
// use.
type Sampler struct {
	insp     Inspector
	interval time.Duration
	window   time.Duration

	mu      sync.Mutex
	samples map[string][]ThroughputSample
	stop    chan struct{}
	done    chan struct{}
}

// NewSampler returns a stopped Sampler that reads insp every interval and
// keeps window worth of samples. interval and window default to 5s and 1m
// when not positive.
func NewSampler(insp Inspector, interval, window time.Duration) *Sampler {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if window <= 0 {
		window = time.Minute
	}
	return &Sampler{insp: insp, interval: interval, window: window, samples: make(map[string][]ThroughputSample)}
}

// Start takes a first sample and starts the background goroutine. It returns
// s for chaining. Calling Start on a running Sampler does nothing.
func (s *Sampler) Start() *Sampler {
	s.mu.Lock()
	if s.stop != nil {
		s.mu.Unlock()
		return s
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	stop, done := s.stop, s.done
	s.mu.Unlock()
	s.sample(time.Now())
	go func() {
		defer close(done)
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				s.sample(now)
			}
		}
	}()
	return s
}

// Stop ends the background goroutine and waits for it. The samples taken
// stay readable. Stop on a stopped Sampler does nothing.
func (s *Sampler) Stop() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
}

// sample reads the Inspector once; a failed read is skipped.
func (s *Sampler) sample(now time.Time) {
	sv, err := s.insp.Stats()
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, qs := range sv.Queues {
		w := s.samples[qs.Queue]
		smp := ThroughputSample{At: now, Processed: qs.Processed}
		if n := len(w); n > 0 {
			prev := w[n-1]
			if qs.Processed < prev.Processed {
				w = nil
			} else if d := now.Sub(prev.At); d > 0 {
				smp.Rate = float64(qs.Processed-prev.Processed) / d.Minutes()
			}
		}
		w = append(w, smp)
		cut := 0
		for cut < len(w)-1 && now.Sub(w[cut].At) > s.window {
			cut++
		}
		s.samples[qs.Queue] = w[cut:]
	}
}

// Rate returns queue's jobs per minute over the window: the growth of its
// processed counter between the oldest and newest samples. It is 0 until
// two samples exist.
func (s *Sampler) Rate(queue string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.samples[queue]
	if len(w) < 2 {
		return 0
	}
	first, last := w[0], w[len(w)-1]
	d := last.At.Sub(first.At)
	if d <= 0 {
		return 0
	}
	return float64(last.Processed-first.Processed) / d.Minutes()
}

// Window returns a copy of queue's samples in the window, oldest first, for
// charting.
func (s *Sampler) Window(queue string) []ThroughputSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ThroughputSample(nil), s.samples[queue]...)
}
