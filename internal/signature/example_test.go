package signature_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/onceflow/onceflow/internal/signature"
)

// A receiver verifies a Standard Webhooks delivery, here one produced with Sign as
// onceflow's demo sender does, and then deduplicates on Delivery.ID.
func ExampleVerify() {
	cfg := signature.Config{
		Scheme: signature.StandardWebhooks,
		// The new secret first; the old one stays until the sender has switched.
		Secrets: []string{"whsec_bmV3LXNlY3JldC1rZXk=", "whsec_b2xkLXNlY3JldC1rZXk="},
	}
	sent := time.Unix(1700000000, 0)
	body := []byte(`{"type":"invoice.paid","id":"in_1"}`)
	h, err := signature.Sign(cfg, 1, "msg_2Kd9", sent, body) // signed with the old secret
	if err != nil {
		panic(err)
	}

	d, err := signature.Verify(cfg, h, body, sent.Add(30*time.Second))
	fmt.Println(d.ID, d.Timestamp.Unix(), err)

	// The same delivery an hour later is a replay.
	_, err = signature.Verify(cfg, h, body, sent.Add(time.Hour))
	fmt.Println(errors.Is(err, signature.ErrExpired))
	fmt.Println(err)
	// Output:
	// msg_2Kd9 1700000000 <nil>
	// true
	// webhook: verify standard-webhooks: webhook-timestamp 1700000000 is 1h0m0s in the past; the tolerance is 5m0s; deliveries must arrive promptly (an old delivery replayed is rejected); check the sender's clock and queue
}

// status maps a verification error to an HTTP status code.
func status(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, signature.ErrMissingSignature), errors.Is(err, signature.ErrMalformed):
		return http.StatusBadRequest
	case errors.Is(err, signature.ErrBadSignature), errors.Is(err, signature.ErrExpired):
		return http.StatusUnauthorized
	default: // signature.ErrInvalidConfig: the receiver's own mistake
		return http.StatusInternalServerError
	}
}

// An HTTP layer maps the sentinels to status codes.
func Example_status() {
	cfg := signature.Config{Scheme: signature.GitHub, Secrets: []string{"It's a Secret to Everybody"}}
	body := []byte("Hello, World!")

	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	_, err := signature.Verify(cfg, h, body, time.Now())
	fmt.Println(status(err))

	_, err = signature.Verify(cfg, h, []byte("Hello, World?"), time.Now())
	fmt.Println(status(err), err)

	_, err = signature.Verify(cfg, http.Header{}, body, time.Now())
	fmt.Println(status(err), err)
	// Output:
	// 200
	// 401 webhook: verify github: the signature matches none of the 1 configured secrets; the webhook's secret on GitHub must be one of them, and the body must arrive unaltered
	// 400 webhook: verify github: X-Hub-Signature-256 header is missing; set a secret on the GitHub webhook so that GitHub signs its deliveries
}
