// Package observe holds Meridian's monitoring integrations, each in a
// package of its own so that a program links only the libraries it uses:
//
//   - promqueue: Prometheus metrics (github.com/prometheus/client_golang)
//   - otelqueue: OpenTelemetry tracing and metrics (go.opentelemetry.io/otel)
//   - alert: long-wait and failure-rate alerts with a webhook hook (no
//     dependencies beyond the standard library)
//
// This package itself has no code; docs/monitoring.md is the guide.
package observe
