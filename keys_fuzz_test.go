package onceflow_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/onceflow/onceflow"
)

// invisible reports whether r is a character the key rules refuse: a control character,
// a format character (zero-width, bidi, …) or a line or paragraph separator.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// FuzzValidateKey checks the key rules on any string: the check never panics, accepts
// exactly the keys the rules describe, and a refusal is a *KeyError that names the kind
// and quotes at most a short prefix of the key.
func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"", "form-8812", "lead-create:8812", " x", "x ", "a\x00b", "a\xffb", "\u0085x",
		"x\u2028y", "\u00a0x", "a\u200bb", "a\u202eb", "a\u2066b", "\ufeffa", "a\u00adb", "a\U000e0041", "e\u0301", strings.Repeat("k", 255), strings.Repeat("k", 256), strings.Repeat("é", 128), "a\tb", "ключ-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := onceflow.ValidateKey("run key", key)
		want := key != "" && len(key) <= onceflow.MaxKeyLength && utf8.ValidString(key) && strings.TrimSpace(key) == key &&
			strings.IndexFunc(key, invisible) < 0
		if (err == nil) != want {
			t.Fatalf("ValidateKey(%q) = %v, want valid %v", key, err, want)
		}
		if err == nil {
			return
		}
		var ke *onceflow.KeyError
		if !errors.As(err, &ke) || ke.Kind != "run key" || !strings.Contains(err.Error(), "run key") {
			t.Fatalf("ValidateKey(%q) = %#v, want a *KeyError naming the run key", key, err)
		}
		if msg := err.Error(); len(msg) > 400 || strings.IndexFunc(msg, invisible) >= 0 || !utf8.ValidString(msg) {
			t.Fatalf("ValidateKey(%q): the error is %d bytes or holds a raw character: %q", key, len(msg), msg)
		}
	})
}
