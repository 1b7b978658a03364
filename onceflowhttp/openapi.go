package onceflowhttp

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 description of every /v1 route, the webhooks and the
// health checks. Tests validate every request and response of the API against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3.1 document of the API (JSON), as GET /v1/openapi.json
// serves it.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

// openAPI is GET /v1/openapi.json; it needs no token.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, err := w.Write(openAPIDocument)
	return err
}
