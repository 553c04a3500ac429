package memqueue_test

import (
	"testing"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

func FuzzPushReserve(f *testing.F) {
	contracttest.FuzzPushReserve(f, map[string]queue.Queue{"memory": memqueue.New()})
}
