package main

import (
	"testing"

	"github.com/meridianjobs/meridian/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
