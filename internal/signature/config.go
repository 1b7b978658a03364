package signature

import (
	"encoding/base64"
	"strings"
	"time"
)

// DefaultTolerance is how far a signed timestamp may be from now, in either direction, when
// [Config.Tolerance] is zero.
const DefaultTolerance = 5 * time.Minute

// Config says how deliveries from one provider are signed. The zero value is not usable:
// set Scheme and Secrets at least.
type Config struct {
	// Scheme is the provider's signing convention.
	Scheme Scheme
	// Secrets are the signing secrets currently valid, newest first. A delivery passes if
	// any of its signatures matches any secret, so during a rotation list both the new and
	// the old one. Give each exactly as the provider shows it: for Stripe the whole
	// "whsec_…" string; for Standard Webhooks the base64 secret, with or without its
	// "whsec_" prefix; for GitHub and HMAC the raw secret.
	Secrets []string
	// Tolerance is how far the signed timestamp may be from now, in either direction, for
	// the schemes that sign one (Stripe, Standard Webhooks, HMAC with TimestampHeader).
	// Zero means DefaultTolerance (5 minutes).
	Tolerance time.Duration

	// The fields below apply to the HMAC scheme only, and must be empty for the others.

	// Header is the request header carrying the signature, such as "X-Signature".
	// Required for HMAC.
	Header string
	// Encoding is how the signature is written: "hex" (the default when empty) or
	// "base64" (standard alphabet, padded).
	Encoding string
	// Prefix, when set, must precede the encoded signature in Header, as in "sha256=".
	Prefix string
	// TimestampHeader, when set, names a header carrying the send time in Unix seconds;
	// the signed content is then "{timestamp}.{body}" instead of the body, and Tolerance
	// applies.
	TimestampHeader string
}

// Encodings accepted in Config.Encoding.
const (
	encodingHex    = "hex"
	encodingBase64 = "base64"
)

// Validate reports the first problem with c, wrapping [ErrInvalidConfig], with a message
// that says what to change. [Verify] and [Sign] call it themselves.
func (c Config) Validate() error {
	_, err := c.keys()
	return err
}

// tolerance returns the effective tolerance.
func (c Config) tolerance() time.Duration {
	if c.Tolerance == 0 {
		return DefaultTolerance
	}
	return c.Tolerance
}

// encoding returns the effective encoding of an HMAC signature.
func (c Config) encoding() string {
	if c.Encoding == "" {
		return encodingHex
	}
	return c.Encoding
}

// keys validates c and returns the HMAC key of each secret, in order.
func (c Config) keys() ([][]byte, error) {
	const op = "config"
	bad := func(format string, args ...any) ([][]byte, error) {
		return nil, newError(ErrInvalidConfig, op, format, args...)
	}
	if c.Scheme == 0 {
		return bad("Scheme is not set; set it to one of %s", schemeList)
	}
	if !c.Scheme.valid() {
		return bad("Scheme %d is unknown; set it to one of %s", int(c.Scheme), schemeList)
	}
	if c.Tolerance < 0 {
		return bad("Tolerance is negative (%v); leave it zero for the default %v or set a positive duration", c.Tolerance, DefaultTolerance)
	}
	if c.Scheme == HMAC {
		if c.Header == "" {
			return bad("the hmac scheme needs Header, the name of the header that carries the signature (such as X-Signature)")
		}
		if !validHeaderName(c.Header) {
			return bad("Header %s is not a valid header name; use letters, digits and hyphens", quote(c.Header))
		}
		if c.TimestampHeader != "" && !validHeaderName(c.TimestampHeader) {
			return bad("TimestampHeader %s is not a valid header name; use letters, digits and hyphens", quote(c.TimestampHeader))
		}
		if strings.EqualFold(c.Header, c.TimestampHeader) {
			return bad("Header and TimestampHeader are the same header (%s); the timestamp needs a header of its own", c.Header)
		}
		if e := c.Encoding; e != "" && e != encodingHex && e != encodingBase64 {
			return bad("Encoding %s is unknown; use %q (the default) or %q", quote(e), encodingHex, encodingBase64)
		}
	} else if c.Header != "" || c.Encoding != "" || c.Prefix != "" || c.TimestampHeader != "" {
		return bad("Header, Encoding, Prefix and TimestampHeader apply only to the hmac scheme; remove them, or set Scheme to hmac")
	}
	if len(c.Secrets) == 0 {
		return bad("no secrets for the %s scheme; set Secrets to the signing secret the provider shows for this endpoint", c.Scheme)
	}
	keys := make([][]byte, len(c.Secrets))
	for i, s := range c.Secrets {
		n := len(c.Secrets)
		if s == "" {
			return bad("secret %d of %d is empty; remove it from Secrets or fill in the signing secret", i+1, n)
		}
		if strings.TrimSpace(s) != s {
			return bad("secret %d of %d has leading or trailing whitespace (a newline from a file?); trim it", i+1, n)
		}
		if c.Scheme != StandardWebhooks {
			keys[i] = []byte(s)
			continue
		}
		raw := strings.TrimPrefix(s, "whsec_")
		key, err := base64.StdEncoding.DecodeString(raw)
		if err != nil {
			return bad("secret %d of %d is not valid base64 after the optional whsec_ prefix; copy the secret exactly as the provider shows it", i+1, n)
		}
		if len(key) == 0 {
			return bad("secret %d of %d is empty after the whsec_ prefix; copy the whole secret", i+1, n)
		}
		keys[i] = key
	}
	return keys, nil
}

// validHeaderName reports whether name is an HTTP field name (an RFC 9110 token).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
