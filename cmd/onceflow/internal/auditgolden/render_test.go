package auditgolden

import (
	"strings"
	"testing"
)

// Times are written as offsets from the base, with their zone when it is not UTC; a time
// no clock of a scenario could have made is an error, not an offset.
func TestNormalizer(t *testing.T) {
	n := normalizer{base: Base}
	got := n.text(`{"at":"2026-03-02T09:01:02.5Z","tick":"2026-03-02T13:00:00+01:00"} 2026-03-02 09:00:05 UTC`)
	if want := `{"at":"T+1m2.5s","tick":"T+3h0m0s@+01:00"} T+5s`; got != want || n.err != nil {
		t.Fatalf("text = %q, %v; want %q", got, n.err, want)
	}
	if n.text("2026-03-01T10:00:00Z"); n.err != nil {
		t.Fatalf("a time less than a day before the base: %v", n.err)
	}
	for _, v := range []string{"2024-01-01T00:00:00Z", "2026-12-01 15:07:18 UTC"} {
		n := normalizer{base: Base}
		n.text(v)
		if n.err == nil || !strings.Contains(n.err.Error(), "no clock of the scenario made it") {
			t.Errorf("%s: %v, want an error", v, n.err)
		}
	}
}

func TestDiff(t *testing.T) {
	got := Diff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nD\ne\nf\ng\n")
	want := "@@ line 2\n  b\n  c\n- d\n+ D\n  e\n  f\n"
	if got != want {
		t.Fatalf("Diff:\n%s\nwant:\n%s", got, want)
	}
	if d := Diff("same\n", "same\n"); d != "" {
		t.Fatalf("Diff of equal texts: %q", d)
	}
}
