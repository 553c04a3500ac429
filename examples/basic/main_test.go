package main

import "testing"

// TestBasic runs the example; it fails the test binary (log.Fatal) if the job
// is not handled.
func TestBasic(t *testing.T) { main() }
