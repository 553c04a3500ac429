package dashboard

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3 document of the JSON API, served at
// api/openapi.json. Its paths are relative to the api/ directory (its
// server is "."), so it holds under any mount prefix. A test holds it
// against the router: every API route is documented and every documented
// operation is routed.
//
//go:embed openapi.json
var openAPI []byte

// apiOpenAPI serves GET api/openapi.json.
func (h *handler) apiOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
