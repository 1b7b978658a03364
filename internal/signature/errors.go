package signature

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. Every error from [Verify] wraps exactly one of the first four; test for
// them with [errors.Is].
var (
	// ErrMissingSignature means the delivery lacks the signature, a header the signature
	// covers, or any signature of a version this package can check.
	ErrMissingSignature = errors.New("webhook: missing signature")
	// ErrMalformed means a signature or timestamp header is present but cannot be parsed.
	ErrMalformed = errors.New("webhook: malformed signature header")
	// ErrBadSignature means no signature in the delivery matches any configured secret:
	// the delivery is not authentic, was altered, or was signed with another secret.
	ErrBadSignature = errors.New("webhook: signature does not match")
	// ErrExpired means the signed timestamp is further from now than the tolerance, in
	// either direction.
	ErrExpired = errors.New("webhook: timestamp outside tolerance")
	// ErrInvalidConfig means the [Config] (or an argument to [Sign]) is unusable; it is the
	// receiver's mistake, not the sender's.
	ErrInvalidConfig = errors.New("webhook: invalid configuration")
)

// Error is the concrete type of the errors this package returns: a message that says what
// is wrong and how to fix it, wrapping one of the sentinels.
type Error struct {
	// Kind is the sentinel the error wraps.
	Kind error
	// Op names the operation and scheme, such as "verify stripe".
	Op  string
	msg string
}

func (e *Error) Error() string { return "webhook: " + e.Op + ": " + e.msg }

// Unwrap returns e.Kind.
func (e *Error) Unwrap() error { return e.Kind }

func newError(kind error, op, format string, args ...any) *Error {
	return &Error{Kind: kind, Op: op, msg: fmt.Sprintf(format, args...)}
}

// quote quotes a value taken from a request for an error message, cut short so that a
// hostile header cannot flood the logs. It is never given a secret or a signature.
func quote(s string) string {
	const max = 40
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
