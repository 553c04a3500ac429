package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

func TestOverdue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		p    driver.PeriodicInfo
		want string // a part of the hint; "" for none
	}{
		{"next tick ahead", driver.PeriodicInfo{NextTick: now.Add(time.Hour), Seen: now}, ""},
		{"just fell", driver.PeriodicInfo{NextTick: now.Add(-10 * time.Second), Seen: now.Add(-time.Hour)}, ""},
		{"no worker since", driver.PeriodicInfo{NextTick: now.Add(-9 * time.Minute), Seen: now.Add(-70 * time.Minute)}, "no worker has registered it or enqueued a tick since 2026-11-27T10:50:00Z"},
		{"never seen (older release)", driver.PeriodicInfo{NextTick: now.Add(-time.Hour)}, "no worker of this release"},
		{"registered since, tick not yet enqueued", driver.PeriodicInfo{NextTick: now.Add(-5 * time.Minute), Seen: now.Add(-time.Minute)}, "has not enqueued that tick yet"},
		{"paused", driver.PeriodicInfo{NextTick: now.Add(-time.Hour), Paused: true}, ""},
	}
	for _, tt := range tests {
		got := overdue(tt.p, now)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: overdue = %q, want %q", tt.name, got, tt.want)
		}
	}
}
