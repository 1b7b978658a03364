package signature

import (
	"fmt"
	"strings"
)

// Scheme is a provider's convention for signing webhook deliveries. The zero value is not a
// scheme; [Config.Validate] rejects it.
type Scheme int

// The supported schemes.
const (
	// Stripe is Stripe's Stripe-Signature header.
	Stripe Scheme = iota + 1
	// StandardWebhooks is the Standard Webhooks specification (webhook-id,
	// webhook-timestamp, webhook-signature), used by Svix and others.
	StandardWebhooks
	// GitHub is GitHub's X-Hub-Signature-256 header.
	GitHub
	// HMAC is a generic HMAC-SHA256 signature in a configurable header.
	HMAC
)

// schemeNames holds each scheme's canonical name, as ParseScheme accepts it.
var schemeNames = [...]string{
	Stripe:           "stripe",
	StandardWebhooks: "standard-webhooks",
	GitHub:           "github",
	HMAC:             "hmac",
}

// schemeList is the list of accepted names used in error messages.
const schemeList = "stripe, standard-webhooks, github, hmac"

func (s Scheme) valid() bool { return s >= Stripe && s <= HMAC }

// String returns the scheme's canonical name ("stripe", "standard-webhooks", "github",
// "hmac"), or "Scheme(N)" for a value that is not a scheme.
func (s Scheme) String() string {
	if !s.valid() {
		return fmt.Sprintf("Scheme(%d)", int(s))
	}
	return schemeNames[s]
}

// ParseScheme returns the scheme named s: "stripe", "standard-webhooks" (or
// "standard_webhooks"), "github" or "hmac". Case and surrounding spaces are ignored.
func ParseScheme(s string) (Scheme, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "stripe":
		return Stripe, nil
	case "standard-webhooks", "standard_webhooks":
		return StandardWebhooks, nil
	case "github":
		return GitHub, nil
	case "hmac":
		return HMAC, nil
	}
	return 0, newError(ErrInvalidConfig, "parse scheme", "unknown scheme %s; use one of %s", quote(s), schemeList)
}
