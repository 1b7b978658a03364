// Package safetext says which characters an identifier may not hold, and writes text from
// outside so that a terminal or a log shows it harmlessly.
//
// One rule serves both ends: run keys, effect keys and entities refuse the characters
// Forbidden reports (control characters, which move a terminal's cursor or start its
// escape sequences; format characters, which are invisible — zero-width spaces and joiners,
// bidi overrides and isolates, the byte order mark, tag characters — so that two keys
// that look the same differ; and the line and paragraph separators), and Escape writes
// them, and bytes that are not UTF-8, as visible escapes, for rows stored before the rule
// and for any other text from outside.
package safetext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Forbidden reports whether r may not appear in an identifier: a control character
// (Unicode category Cc: C0, DEL, C1), a format character (Cf: U+00AD, U+061C, U+180E,
// U+200B–U+200F, U+202A–U+202E, U+2060–U+2064, U+2066–U+206F, U+FEFF, U+FFF9–U+FFFB,
// U+E0001–U+E007F, …) or a line or paragraph separator (U+2028, U+2029).
func Forbidden(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.In(r, unicode.Zl, unicode.Zp)
}

// Describe names a forbidden rune for an error message: "a control character U+001B",
// "a format character U+202E (invisible, or it reorders the text around it)".
func Describe(r rune) string {
	switch {
	case unicode.IsControl(r):
		return fmt.Sprintf("a control character %U", r)
	case unicode.Is(unicode.Cf, r):
		return fmt.Sprintf("an invisible formatting character %U (zero-width, bidi or similar)", r)
	default:
		return fmt.Sprintf("a line or paragraph separator %U", r)
	}
}

// Escape returns s with every forbidden rune written as a Go escape (\n, \t, \x1b,
// \u202e, \U000e0041) and every byte that is not UTF-8 as \xNN; anything else — a
// backslash too — is kept as it is. The result holds no character a terminal acts on and
// breaks no line or table cell.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case Forbidden(r):
			q := strconv.QuoteRune(r) // '\x1b', '\u202e', '\n'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return strings.IndexFunc(s, Forbidden) < 0 && utf8.ValidString(s)
		}
	}
	return true
}

// Quote returns s quoted and escaped as strconv.Quote does, cut to its first max bytes (on
// a character boundary) with "…" and its length when it is longer: an error message never
// echoes a 60 KB value.
func Quote(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
