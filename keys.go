package onceflow

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLength is the longest run key or effect key, in bytes.
const MaxKeyLength = 255

// ValidateKey checks a run key or effect key against the key rules: not empty, at most
// MaxKeyLength bytes of UTF-8, no control characters, no leading or trailing white space.
// kind ("run key", "effect key") appears in the error.
func ValidateKey(kind, key string) error {
	bad := func(format string, args ...any) error {
		return &KeyError{Kind: kind, Key: key, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case key == "":
		return bad("is empty; give a stable identifier of the business action, such as the submission or order id")
	case len(key) > MaxKeyLength:
		return bad("is %d bytes long; the limit is %d", len(key), MaxKeyLength)
	case !utf8.ValidString(key):
		return bad("is not valid UTF-8")
	case strings.TrimSpace(key) != key:
		return bad("has leading or trailing white space")
	}
	for i, r := range key {
		if unicode.IsControl(r) {
			return bad("has a control character %U at byte %d", r, i)
		}
	}
	return nil
}
