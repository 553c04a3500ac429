package dashboard

import "net/http"

// RoutePatterns returns the patterns the router of h, a Handler, was
// given, in registration order.
func RoutePatterns(h http.Handler) []string { return h.(*handler).mux.patterns }
