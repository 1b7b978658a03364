package signature

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// verifyHMAC checks a generic HMAC-SHA256 signature: cfg.Header holds cfg.Prefix followed by
// the signature in cfg.Encoding, over the body, or over "{timestamp}.{body}" when
// cfg.TimestampHeader is set.
func verifyHMAC(cfg Config, keys [][]byte, h http.Header, body []byte, now time.Time) (*Delivery, error) {
	const op = "verify hmac"
	v := h.Get(cfg.Header)
	if v == "" {
		return nil, newError(ErrMissingSignature, op, "%s header is missing; the sender must sign every delivery", cfg.Header)
	}
	var t string
	if cfg.TimestampHeader != "" {
		if t = h.Get(cfg.TimestampHeader); t == "" {
			return nil, newError(ErrMissingSignature, op,
				"%s header is missing; the signature covers the timestamp, so the sender must send it", cfg.TimestampHeader)
		}
	}
	enc, ok := strings.CutPrefix(v, cfg.Prefix)
	if !ok {
		return nil, newError(ErrMalformed, op, "%s does not start with %q; expected %s<%s signature>", cfg.Header, cfg.Prefix, cfg.Prefix, cfg.encoding())
	}
	var sig []byte
	if cfg.encoding() == encodingBase64 {
		sig, ok = decodeBase64Sig(enc)
	} else {
		sig, ok = decodeHexSig(enc)
	}
	if !ok {
		return nil, newError(ErrMalformed, op, "%s is not %s<%s of a %d-byte signature>", cfg.Header, cfg.Prefix, cfg.encoding(), sigSize)
	}
	d := &Delivery{}
	parts := [][]byte{body}
	if cfg.TimestampHeader != "" {
		ts, ok := parseUnix(t)
		if !ok {
			return nil, newError(ErrMalformed, op, "%s %s is not a time in Unix seconds", cfg.TimestampHeader, quote(t))
		}
		if err := checkAge(op, cfg.TimestampHeader, t, ts, now, cfg.tolerance()); err != nil {
			return nil, err
		}
		d.Timestamp = ts
		parts = [][]byte{[]byte(t), dot, body}
	}
	if !matchAny(keys, [][]byte{sig}, parts...) {
		content := "the body"
		if cfg.TimestampHeader != "" {
			content = "\"{timestamp}.{body}\""
		}
		return nil, newError(ErrBadSignature, op,
			"the signature matches none of the %d configured secrets; the sender must sign %s with HMAC-SHA256 and one of them, and the body must arrive unaltered",
			len(keys), content)
	}
	return d, nil
}

// signHMAC sets cfg.Header (and cfg.TimestampHeader, when configured, to t).
func signHMAC(cfg Config, h http.Header, key []byte, t string, body []byte) {
	var sig []byte
	if cfg.TimestampHeader != "" {
		h.Set(cfg.TimestampHeader, t)
		sig = mac(key, []byte(t), dot, body)
	} else {
		sig = mac(key, body)
	}
	var enc string
	if cfg.encoding() == encodingBase64 {
		enc = base64.StdEncoding.EncodeToString(sig)
	} else {
		enc = hex.EncodeToString(sig)
	}
	h.Set(cfg.Header, cfg.Prefix+enc)
}
