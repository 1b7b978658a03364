package safetext

import (
	"strings"
	"testing"
	"unicode"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"lead:8812":              "lead:8812",
		"ключ-1 é":               "ключ-1 é",
		"a\x1b[2Jb":              `a\x1b[2Jb`,
		"a\nrun 2  forged":       `a\nrun 2  forged`,
		"a\tb\rc":                `a\tb\rc`,
		"a\u202eb\u2066c\u200bd": `a\u202eb\u2066c\u200bd`,
		"\ufeffa\u00adb":         `\ufeffa\u00adb`,
		"a\u2028b":               `a\u2028b`,
		"a\x9bb":                 `a\x9bb`, // not UTF-8: the byte alone
		"a\u009bb":               `a\u009bb`,
		"a\xffb":                 `a\xffb`,
		`C:\path\x1b`:            `C:\path\x1b`, // a backslash is kept
		"tag\U000e0041":          `tag\U000e0041`,
		"emoji 👍 and 漢字 stay":    "emoji 👍 and 漢字 stay",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// Escape leaves no character Forbidden reports, whatever the input.
func TestEscapeLeavesNothingForbidden(t *testing.T) {
	var b strings.Builder
	for r := rune(0); r <= 0x10ffff; r++ {
		if r < 0xd800 || r > 0xdfff {
			b.WriteRune(r)
		}
	}
	got := Escape(b.String())
	for _, r := range got {
		if Forbidden(r) || unicode.IsControl(r) {
			t.Fatalf("Escape left %U", r)
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("k\x1b", 64); got != `"k\x1b"` {
		t.Errorf("short: %s", got)
	}
	got := Quote(strings.Repeat("é", 100), 9) // 9 bytes fall inside the fifth é
	if got != `"éééé"… (200 bytes)` {
		t.Errorf("long: %s", got)
	}
}
