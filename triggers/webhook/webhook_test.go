package webhook_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/webhook"
)

const secret = "whsec_bmV3LXNlY3JldC0wMTIzNDU2Nzg5"

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// stripe is the receiver of a Stripe webhook that handles one event type.
func stripe(t *testing.T, vars map[string]string) *webhook.Receiver {
	t.Helper()
	r, err := webhook.New("payment", webhook.Config{Name: "payments", Scheme: "stripe", SecretEnv: []string{"HOOK_SECRET"},
		EventID: "{input.id}", EventTypes: []string{"payment_intent.succeeded"}}, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// signed is a delivery of body signed at at with the test's secret.
func signed(t *testing.T, body string, at time.Time) *triggers.Delivery {
	t.Helper()
	h, err := signature.Sign(signature.Config{Scheme: signature.Stripe, Secrets: []string{secret}}, 0, "", at, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return &triggers.Delivery{Header: h, Body: []byte(body), Received: at}
}

// Verify tells apart an unsigned, a forged and an expired delivery; Route ignores an
// event type the workflow does not handle, keys the run by the event id, and says when
// there is none or the body is not a JSON object.
func TestReceiverVerifiesAndRoutes(t *testing.T) {
	r := stripe(t, map[string]string{"HOOK_SECRET": secret})
	if r.Err() != nil || r.Name() != "payments" || r.Workflow() != "payment" {
		t.Fatalf("receiver %s of %s: %v", r.Name(), r.Workflow(), r.Err())
	}
	now := time.Unix(1700000000, 0)
	body := `{"id": "evt_1", "type": "payment_intent.succeeded"}`
	kinds := map[string]struct {
		d    *triggers.Delivery
		want triggers.DeliveryErrorKind
	}{
		"unsigned": {&triggers.Delivery{Header: http.Header{}, Body: []byte(body), Received: now}, triggers.Unsigned},
		"forged":   {func() *triggers.Delivery { d := signed(t, body, now); d.Body = []byte(`{"id": "evt_2"}`); return d }(), triggers.Forged},
		"expired":  {func() *triggers.Delivery { d := signed(t, body, now); d.Received = now.Add(time.Hour); return d }(), triggers.Expired},
	}
	for name, tc := range kinds {
		if err := r.Verify(tc.d); triggers.KindOf(err) != tc.want {
			t.Errorf("%s: Verify = %v (kind %v), want %v", name, err, triggers.KindOf(err), tc.want)
		}
	}
	routes := map[string]struct {
		body    string
		want    triggers.Route
		errKind triggers.DeliveryErrorKind
	}{
		"handled":  {body, triggers.Route{RunKey: "evt_1"}, 0},
		"ignored":  {`{"id": "evt_3", "type": "charge.refunded"}`, triggers.Route{Ignored: true, Why: `event type "charge.refunded" is not handled by payment`}, 0},
		"no id":    {`{"type": "payment_intent.succeeded"}`, triggers.Route{}, triggers.NoEventID},
		"not JSON": {`[1, 2]`, triggers.Route{}, triggers.NotJSON},
	}
	for name, tc := range routes {
		d := signed(t, tc.body, now)
		if err := r.Verify(d); err != nil {
			t.Fatalf("%s: Verify = %v", name, err)
		}
		got, err := r.Route(d)
		if got != tc.want || triggers.KindOf(err) != tc.errKind || (tc.errKind == 0) != (err == nil) {
			t.Errorf("%s: Route = %+v, %v; want %+v, kind %v", name, got, err, tc.want, tc.errKind)
		}
	}
}

// A receiver whose secret is missing or malformed is built, says why on Err naming the
// variable and never the secret, and refuses every delivery as misconfigured; a mistake
// in the configuration itself is New's error.
func TestReceiverWithoutUsableSecret(t *testing.T) {
	for name, vars := range map[string]map[string]string{"missing": {}, "malformed": {"HOOK_SECRET": "whsec_not base64!"}} {
		// A Standard Webhooks secret is base64: one that is not cannot be used.
		r, err := webhook.New("payment", webhook.Config{Name: "payments", Scheme: "standard-webhooks", SecretEnv: []string{"HOOK_SECRET"}}, env(vars))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Err()
		if err == nil || !strings.Contains(err.Error(), "HOOK_SECRET") || strings.Contains(err.Error(), "not base64!") {
			t.Fatalf("%s: Err = %v", name, err)
		}
		if err := r.Verify(signed(t, `{"id": "evt_1"}`, time.Now())); triggers.KindOf(err) != triggers.Misconfigured {
			t.Fatalf("%s: Verify = %v, want misconfigured", name, err)
		}
	}
	for _, tc := range []struct {
		cfg  webhook.Config
		want string
	}{
		{webhook.Config{Name: "gh", Scheme: "github", SecretEnv: []string{"S"}}, "needs event_id"},
		{webhook.Config{Name: "x", Scheme: "paypal", SecretEnv: []string{"S"}}, "unknown scheme"},
		{webhook.Config{Name: "x", Scheme: "stripe", SecretEnv: []string{"S"}, EventID: "{steps.a.id}"}, "may read only {input.…}"},
	} {
		if _, err := webhook.New("w", tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
