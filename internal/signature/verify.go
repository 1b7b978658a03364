package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Delivery is what Verify learned from an authentic delivery's headers.
type Delivery struct {
	// ID is the delivery or event id when the scheme's headers carry one: webhook-id for
	// Standard Webhooks, X-GitHub-Delivery for GitHub. It is "" otherwise; Stripe's event
	// id is in the body, and the caller extracts it.
	ID string
	// Timestamp is the signed send time, in UTC, or the zero time when the scheme has none.
	Timestamp time.Time
}

// Verify checks that body and the headers h are an authentic delivery signed as cfg
// describes, with its timestamp (if the scheme signs one) within cfg's tolerance of now.
// body must be the raw request body exactly as received. Only the first value of each
// header is read.
//
// An error wraps [ErrMissingSignature], [ErrMalformed], [ErrExpired] or [ErrBadSignature]
// when the delivery is at fault, and [ErrInvalidConfig] when cfg is.
func Verify(cfg Config, h http.Header, body []byte, now time.Time) (*Delivery, error) {
	keys, err := cfg.keys()
	if err != nil {
		return nil, err
	}
	switch cfg.Scheme {
	case Stripe:
		return verifyStripe(cfg, keys, h, body, now)
	case StandardWebhooks:
		return verifyStandard(cfg, keys, h, body, now)
	case GitHub:
		return verifyGitHub(keys, h, body)
	default: // HMAC; keys has rejected anything else.
		return verifyHMAC(cfg, keys, h, body, now)
	}
}

// sigSize is the length of an HMAC-SHA256 signature in bytes.
const sigSize = sha256.Size

// mac returns HMAC-SHA256(key, the concatenation of parts).
func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// matchAny reports whether any of sigs is the signature of the content (the concatenation
// of parts) under any of keys. Each comparison is constant-time.
func matchAny(keys, sigs [][]byte, parts ...[]byte) bool {
	for _, key := range keys {
		want := mac(key, parts...)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return true
			}
		}
	}
	return false
}

var dot = []byte{'.'}

// parseUnix parses a timestamp in whole Unix seconds. Only ASCII digits are accepted, so the
// string that was signed is the only spelling of the time.
func parseUnix(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0).UTC(), true
}

// checkAge returns an ErrExpired error when ts, spelled raw and described as what, is
// further than tol from now in either direction.
func checkAge(op, what, raw string, ts, now time.Time, tol time.Duration) error {
	d := now.Sub(ts)
	if d >= -tol && d <= tol {
		return nil
	}
	dir := "in the past"
	fix := "deliveries must arrive promptly (an old delivery replayed is rejected); check the sender's clock and queue"
	if d < 0 {
		dir = "in the future"
		fix = "check the sender's clock"
		if d == math.MinInt64 {
			d = math.MaxInt64
		} else {
			d = -d
		}
	}
	if r := d.Round(time.Second); r > tol {
		d = r
	}
	return newError(ErrExpired, op, "%s %s is %v %s; the tolerance is %v; %s",
		what, raw, d, dir, tol, fix)
}

// decodeHexSig decodes a hex HMAC-SHA256 signature (either case).
func decodeHexSig(s string) ([]byte, bool) {
	if len(s) != 2*sigSize {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// strictBase64 decodes only the canonical spelling of each value, so that every
// signature has exactly one accepted form.
var strictBase64 = base64.StdEncoding.Strict()

// decodeBase64Sig decodes a standard, padded base64 HMAC-SHA256 signature.
func decodeBase64Sig(s string) ([]byte, bool) {
	// The decoder skips CR and LF; a signature containing them is not one the sender
	// wrote.
	if len(s) != strictBase64.EncodedLen(sigSize) || strings.ContainsAny(s, "\r\n") {
		return nil, false
	}
	b, err := strictBase64.DecodeString(s)
	return b, err == nil && len(b) == sigSize
}
