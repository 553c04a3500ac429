// Package scale fills a queue with jobs shaped like a production store that
// has run for a while, for benchmarks and smoke tests of the dashboard at
// size: most jobs done and kept by retention, a large failed set, many
// jobs scheduled hours ahead, a queue with a deep backlog that no worker
// serves, and a little ready work on the served queues. It fills through
// the store contract (PushMany, Reserve, Complete), so the same shape
// lands on every driver.
package scale
