package flowfile

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// aliasBomb is a small file whose nested aliases stand for 10^9 values in an http body.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("name: bomb\nsteps:\n  - id: a\n    kind: http\n    effect_key: \"k:{input.id}\"\n    http:\n      url: \"https://example.com\"\n      body:\n")
	b.WriteString(`        l0: &l0 ["x","x","x","x","x","x","x","x","x","x"]` + "\n")
	for i := 1; i < 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ",")
		fmt.Fprintf(&b, "        l%d: &l%d [%s]\n", i, i, refs)
	}
	return b.String()
}

func TestAliasBombIsRefused(t *testing.T) {
	src := aliasBomb()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d, ps := Parse("bomb.yaml", []byte(src))
	runtime.ReadMemStats(&after)
	if d != nil || len(ps) != 1 || !strings.Contains(ps[0].Message, "aliases expand") || ps[0].Line == 0 {
		t.Fatalf("Parse = %v, %v; want one problem about aliases at a line", d, ps)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("refusing a %d-byte file allocated %d MB", len(src), got>>20)
	}
	// A file that uses aliases modestly is fine.
	ok := strings.Replace(src, "l8: &l8", "# l8: &l8", 1)
	ok = ok[:strings.Index(ok, "        l3:")]
	if _, ps := Parse("ok.yaml", []byte(ok)); ps != nil {
		t.Fatalf("a file with a few aliases: %v", ps)
	}
}
