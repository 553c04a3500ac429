package redisqueue_test

import (
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, removeFaultWorker) }
