package slackstep_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/steps/slackstep"
	"github.com/onceflow/onceflow/steps/steptest"
)

// webhook is a Slack-compatible endpoint whose next answers the test chooses: 200 ok, 503,
// 404 no_service, or the message posted and no answer before the step's timeout.
type webhook struct {
	*httptest.Server
	mu   sync.Mutex
	next []steptest.Outcome
	keys []string
}

func TestConformance(t *testing.T) {
	steptest.Exercise(t, func(t *testing.T) steptest.Harness {
		w := &webhook{}
		w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.mu.Lock()
			w.keys = append(w.keys, r.Header.Get("Idempotency-Key"))
			o := steptest.Success
			if len(w.next) > 0 {
				o, w.next = w.next[0], w.next[1:]
			}
			w.mu.Unlock()
			switch o {
			case steptest.Retryable:
				rw.WriteHeader(http.StatusServiceUnavailable)
			case steptest.Permanent:
				rw.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(rw, "no_service")
			case steptest.Unknown:
				<-r.Context().Done()
			default:
				_, _ = io.WriteString(rw, "ok")
			}
		}))
		t.Cleanup(w.Close)
		policy := &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
		return steptest.Harness{
			Kind:  slackstep.NewKind(slackstep.KindOptions{Client: policy.Client(0)}),
			Block: "webhook: \"{env.SLACK_WEBHOOK}\"\ntext: \"Order {input.id} is paid\"\ntimeout: 500ms\n",
			Env:   map[string]string{"SLACK_WEBHOOK": w.URL + "/services/T0/B0/x"},
			Arrange: func(_ *testing.T, o steptest.Outcome) bool {
				w.mu.Lock()
				w.next = append(w.next, o)
				w.mu.Unlock()
				return true
			},
			Identities: func(*testing.T) []string { w.mu.Lock(); defer w.mu.Unlock(); return append([]string(nil), w.keys...) },
			Broken:     "webhook: \"https://hooks.slack.com/services/T0/B0/x\"\ntext: hi\n",
		}
	})
}
