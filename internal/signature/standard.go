package signature

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"
)

// The Standard Webhooks headers, in canonical form.
const (
	standardID        = "Webhook-Id"
	standardTimestamp = "Webhook-Timestamp"
	standardSignature = "Webhook-Signature"
)

// verifyStandard checks a Standard Webhooks delivery: webhook-signature is a space-separated
// list of "<version>,<signature>" entries; each v1 entry is the standard base64 of
// HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}"). Entries of other versions
// (such as the asymmetric v1a) are ignored.
func verifyStandard(cfg Config, keys [][]byte, h http.Header, body []byte, now time.Time) (*Delivery, error) {
	const op = "verify standard-webhooks"
	id, t, v := h.Get(standardID), h.Get(standardTimestamp), h.Get(standardSignature)
	var missing []string
	for _, m := range []struct{ name, val string }{
		{"webhook-id", id}, {"webhook-timestamp", t}, {"webhook-signature", v},
	} {
		if m.val == "" {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		noun := "header is"
		if len(missing) > 1 {
			noun = "headers are"
		}
		return nil, newError(ErrMissingSignature, op,
			"%s %s missing; the sender must send webhook-id, webhook-timestamp and webhook-signature with every delivery",
			strings.Join(missing, ", "), noun)
	}
	ts, ok := parseUnix(t)
	if !ok {
		return nil, newError(ErrMalformed, op, "webhook-timestamp %s is not a time in Unix seconds", quote(t))
	}
	var sigs [][]byte
	for i, entry := range strings.Split(v, " ") {
		if entry == "" {
			continue
		}
		version, enc, ok := strings.Cut(entry, ",")
		if !ok {
			return nil, newError(ErrMalformed, op,
				"webhook-signature entry %d has no ','; expected space-separated v1,<base64 signature> entries", i+1)
		}
		if version != "v1" {
			continue
		}
		sig, ok := decodeBase64Sig(enc)
		if !ok {
			return nil, newError(ErrMalformed, op,
				"webhook-signature entry %d is not v1,<standard padded base64 of a %d-byte signature>", i+1, sigSize)
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return nil, newError(ErrMissingSignature, op,
			"webhook-signature has no v1 entry; only v1 (HMAC-SHA256) is accepted, so the sender must include one")
	}
	if err := checkAge(op, "webhook-timestamp", t, ts, now, cfg.tolerance()); err != nil {
		return nil, err
	}
	if !matchAny(keys, sigs, []byte(id), dot, []byte(t), dot, body) {
		return nil, newError(ErrBadSignature, op,
			"no v1 signature matches any of the %d configured secrets; the sender must sign \"{webhook-id}.{webhook-timestamp}.{body}\" with the base64-decoded secret, and the body must arrive unaltered",
			len(keys))
	}
	return &Delivery{ID: id, Timestamp: ts}, nil
}

// signStandard sets the three Standard Webhooks headers for message id sent at t.
func signStandard(h http.Header, key []byte, id, t string, body []byte) {
	sig := mac(key, []byte(id), dot, []byte(t), dot, body)
	h.Set(standardID, id)
	h.Set(standardTimestamp, t)
	h.Set(standardSignature, "v1,"+base64.StdEncoding.EncodeToString(sig))
}
