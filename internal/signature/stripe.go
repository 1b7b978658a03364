package signature

import (
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

const stripeHeader = "Stripe-Signature"

// verifyStripe checks Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=<hex>], where
// each v1 is HMAC-SHA256(secret, "{t}.{body}") in hex. Other keys (v0, test schemes) are
// ignored.
func verifyStripe(cfg Config, keys [][]byte, h http.Header, body []byte, now time.Time) (*Delivery, error) {
	const op = "verify stripe"
	v := h.Get(stripeHeader)
	if v == "" {
		return nil, newError(ErrMissingSignature, op,
			"Stripe-Signature header is missing; Stripe signs every delivery, so the request is not from Stripe or a proxy dropped the header")
	}
	const want = "expected t=<unix seconds>,v1=<hex signature>"
	var (
		t     string
		haveT bool
		sigs  [][]byte
	)
	for i, item := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, newError(ErrMalformed, op, "Stripe-Signature item %d has no '='; %s", i+1, want)
		}
		switch k {
		case "t":
			if haveT {
				return nil, newError(ErrMalformed, op, "Stripe-Signature has more than one t= item; %s", want)
			}
			t, haveT = val, true
		case "v1":
			sig, ok := decodeHexSig(val)
			if !ok {
				return nil, newError(ErrMalformed, op, "Stripe-Signature item %d is not a v1 signature of %d hex digits; %s", i+1, 2*sigSize, want)
			}
			sigs = append(sigs, sig)
		}
	}
	if !haveT {
		return nil, newError(ErrMalformed, op, "Stripe-Signature has no t= timestamp; %s", want)
	}
	ts, ok := parseUnix(t)
	if !ok {
		return nil, newError(ErrMalformed, op, "Stripe-Signature timestamp %s is not a time in Unix seconds; %s", quote(t), want)
	}
	if len(sigs) == 0 {
		return nil, newError(ErrMissingSignature, op,
			"Stripe-Signature has no v1 signature; only v1 (HMAC-SHA256) is accepted, so the sender must include one")
	}
	if err := checkAge(op, "Stripe-Signature timestamp", t, ts, now, cfg.tolerance()); err != nil {
		return nil, err
	}
	if !matchAny(keys, sigs, []byte(t), dot, body) {
		return nil, newError(ErrBadSignature, op,
			"no v1 signature matches any of the %d configured secrets; the sender must sign \"{t}.{body}\" with this endpoint's signing secret, and the body must arrive unaltered",
			len(keys))
	}
	return &Delivery{Timestamp: ts}, nil
}

// signStripe returns the Stripe-Signature header for body sent at t.
func signStripe(h http.Header, key []byte, t string, body []byte) {
	h.Set(stripeHeader, "t="+t+",v1="+hex.EncodeToString(mac(key, []byte(t), dot, body)))
}
