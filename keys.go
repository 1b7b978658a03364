package onceflow

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/onceflow/onceflow/internal/safetext"
)

// MaxKeyLength is the longest run key, effect key or entity, in bytes.
const MaxKeyLength = 255

// ValidateKey checks a run key or effect key against the identifier rules: not empty, at
// most MaxKeyLength bytes of UTF-8, no surrounding white space, and none of the characters
// that a terminal acts on or that cannot be seen — control characters (Unicode Cc), format
// characters (Cf: zero-width spaces and joiners U+200B–U+200D, the bidi marks, embeddings,
// overrides and isolates U+200E–U+200F, U+202A–U+202E, U+2066–U+2069, the invisible
// operators U+2060–U+2064, the byte order mark U+FEFF, the soft hyphen, tag characters, …)
// and the line and paragraph separators U+2028 and U+2029. kind ("run key", "effect key")
// appears in the error.
//
// Keys are compared byte for byte: nothing is normalized, folded or trimmed, so "é"
// written as one code point and as "e" followed by a combining accent are two keys, as are
// "Order-1" and "order-1". The rules keep apart only what a person could not tell apart.
func ValidateKey(kind, key string) error {
	if key == "" {
		return &KeyError{Kind: kind, Key: key, Problem: "is empty; give a stable identifier of the business action, such as the submission or order id"}
	}
	return checkIdentifier(kind, key)
}

// ValidateEntity checks an entity (the business object a run is about, such as
// "lead:8812") against the rules ValidateKey applies to keys; the empty entity, a run
// about no entity, is valid. Start checks the entity a workflow's template derives before
// anything is written.
func ValidateEntity(entity string) error {
	if entity == "" {
		return nil
	}
	return checkIdentifier("entity", entity)
}

// checkIdentifier applies the rules every identifier shares.
func checkIdentifier(kind, s string) error {
	bad := func(format string, args ...any) error {
		return &KeyError{Kind: kind, Key: s, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case len(s) > MaxKeyLength:
		return bad("is %d bytes long; the limit is %d", len(s), MaxKeyLength)
	case !utf8.ValidString(s):
		return bad("is not valid UTF-8")
	}
	for i, r := range s {
		if safetext.Forbidden(r) {
			return bad("has %s at byte %d", safetext.Describe(r), i)
		}
	}
	if strings.TrimSpace(s) != s {
		return bad("has leading or trailing white space")
	}
	return nil
}
