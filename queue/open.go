package queue

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sync"

	"github.com/meridianjobs/meridian/internal/urlquery"
)

// Opener opens a Queue from a URL. Drivers register one per scheme. The
// Queue it returns must also be an io.Closer that releases what the open
// acquired (connections, files); Open refuses one that is not.
type Opener func(ctx context.Context, u *url.URL) (Queue, error)

// QueueCloser is a Queue that its opener owns and Close releases: what
// Open returns. Its optional abilities (Inspector, Controller, ...) are
// found with driver.CapabilitiesOf as on any Queue.
type QueueCloser interface {
	Queue
	io.Closer
}

// The driver registry is the one piece of global state in this package: it
// maps URL schemes to openers so that code can pick a driver from
// configuration (queue.Open(ctx, os.Getenv("QUEUE_URL"))).
var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// Register makes a driver available to Open under scheme. Drivers call it
// from an init function of a package the user imports for its side effect
// (for example _ "github.com/meridianjobs/meridian/sqlqueue/sqlite").
// Registering a scheme twice panics, as database/sql's Register does.
func Register(scheme string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if open == nil {
		panic("queue: Register opener is nil")
	}
	if _, dup := registry[scheme]; dup {
		panic("queue: Register called twice for scheme " + scheme)
	}
	registry[scheme] = open
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var s []string
	for k := range registry {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the queue that rawURL names, through the driver registered for
// its scheme: memory:// (memqueue), sqlite://path, postgres://...,
// mysql://... . The driver's package must be imported for its scheme to be
// known. A query that url.ParseQuery rejects (a ";" in a value, a bad
// %-escape) is refused before any driver sees it: url.URL.Query would drop
// that parameter silently. Close the queue when done with it.
func Open(ctx context.Context, rawURL string) (QueueCloser, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("queue: parsing queue URL: %w", err)
	}
	if _, err := urlquery.Values(u); err != nil {
		return nil, fmt.Errorf("queue: queue URL: %w", err)
	}
	registryMu.RLock()
	open := registry[u.Scheme]
	registryMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("queue: no driver registered for scheme %q (registered: %v); import the driver's package", u.Scheme, Schemes())
	}
	q, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("queue: opening %s queue: %w", u.Scheme, err)
	}
	qc, ok := q.(QueueCloser)
	if !ok {
		return nil, fmt.Errorf("queue: the %s driver's queue (%T) has no Close method; an Opener must return an io.Closer", u.Scheme, q)
	}
	return qc, nil
}
