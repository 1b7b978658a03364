package httpstep_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/steps/httpstep"
	"github.com/onceflow/onceflow/steps/steptest"
)

// destination is an HTTP server whose next answers the test chooses: 200, 503, 422, or
// the effect applied and no answer before the step's timeout (unknown).
type destination struct {
	*httptest.Server
	mu   sync.Mutex
	next []steptest.Outcome
	keys []string
}

func newDestination(t *testing.T) *destination {
	d := &destination{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d.mu.Lock()
		d.keys = append(d.keys, r.Header.Get("Idempotency-Key"))
		o := steptest.Success
		if len(d.next) > 0 {
			o, d.next = d.next[0], d.next[1:]
		}
		d.mu.Unlock()
		switch o {
		case steptest.Retryable:
			w.WriteHeader(http.StatusServiceUnavailable)
		case steptest.Permanent:
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error": "invalid email"}`)
		case steptest.Unknown:
			<-r.Context().Done() // applied, and no answer before the client gives up
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id": "lead_1"}`)
		}
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *destination) arrange(_ *testing.T, o steptest.Outcome) bool {
	d.mu.Lock()
	d.next = append(d.next, o)
	d.mu.Unlock()
	return true
}

func (d *destination) identities(*testing.T) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.keys...)
}

func TestConformance(t *testing.T) {
	steptest.Exercise(t, func(t *testing.T) steptest.Harness {
		d := newDestination(t)
		policy := &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
		return steptest.Harness{
			Kind:       httpstep.NewKind(httpstep.KindOptions{Client: policy.Client(0)}),
			Block:      "url: \"{env.CRM_URL}/leads\"\nbody: {external_id: \"{input.id}\"}\ntimeout: 500ms\n",
			Env:        map[string]string{"CRM_URL": d.URL},
			Arrange:    d.arrange,
			Identities: d.identities,
			Broken:     "url: \"{env.CRM_URL}/leads\"\nmethod: FETCH\n",
		}
	})
}
