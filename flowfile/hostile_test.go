package flowfile

import (
	"fmt"
	"os"
	"path/filepath"
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
	d, ps := testReader.Parse("bomb.yaml", []byte(src))
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
	if _, ps := testReader.Parse("ok.yaml", []byte(ok)); ps != nil {
		t.Fatalf("a file with a few aliases: %v", ps)
	}
}

// A YAML tag is refused at its position. A tagged scalar where a list belongs
// (`needs: !!str a`) used to crash the YAML decoder with a nil pointer instead of failing.
func TestYAMLTagsAreRefused(t *testing.T) {
	for _, src := range []string{
		"name: w\nsteps:\n  - id: a\n    needs: !!str x\n    kind: go\n    func: noop\n",
		"name: w\nsteps:\n  - id: a\n    needs: !custom x\n    kind: go\n    func: noop\n",
		"name: w\nsteps: !!seq\n  - {id: a, kind: go, func: noop}\n",
		"name: !!str w\nsteps:\n  - {id: a, kind: go, func: noop}\n",
	} {
		d, ps := testReader.Parse("w.yaml", []byte(src))
		if d != nil || len(ps) != 1 || !strings.Contains(ps[0].Message, "YAML tag") || ps[0].Line == 0 {
			t.Errorf("testReader.Parse(%q) = %v, %v; want one problem about a YAML tag at a line", src, d, ps)
		}
	}
}

// Every template problem that would otherwise surface on the first run is reported by
// Parse — which validate and start-up both use — all at once, each at its field.
func TestTemplateReferencesAreChecked(t *testing.T) {
	src := `name: refs
steps:
  - id: a
    kind: http
    effect_key: "a:{input.id}"
    http:
      url: "https://example.com/{steps.b.output.id}"
      headers: {"Bad Header": "x", X-Run: "{run.nope}"}
      body: {x: "{steps.nope.output.id}", y: ["{steps.a.output.id}"]}
  - id: b
    kind: http
    needs: [a]
    effect_key: "b:{input.id}"
    http: {url: "https://example.com/{steps.a.output.id}/{env.BASE}"}
  - id: t
    kind: transition
    needs: [a]
    effect_key: "t:{input.id}"
    transition: {entity: "order:{env.X}:{steps.missing.output.id}", from: [new], to: paid}
  - id: m
    kind: email
    effect_key: "m:{input.id}"
    email: {from: "a@example.com", to: "{input.email}", subject: "{foo}", body: "{input.x"}
`
	_, ps := testReader.Parse("refs.yaml", []byte(src))
	text := ps.Error()
	for _, want := range []string{
		`refs.yaml:7:`, `url reads {steps.b.output.id}: "b" is not a step this step needs`,
		`"Bad Header" is not a valid HTTP header name`,
		`header X-Run reads {run.nope}: a run has {run.key} and {run.id} only`,
		`body reads {steps.nope.output.id}: "nope" is not a step`,
		`body reads {steps.a.output.id}: "a" is not a step`,
		`transition entity reads {env.X}: an entity is an identifier`,
		`transition entity reads {steps.missing.output.id}`,
		`email subject reads {foo}`,
		`email body: template "{input.x"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("problems do not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `step "b"`) {
		t.Errorf("step b reads only what it may:\n%s", text)
	}
}

// Every problem of an http block is reported, not only the first one found: bad header
// names, a header template that does not parse, the verify request's own problems and a
// classify rule, each once.
func TestEveryRequestProblemIsReported(t *testing.T) {
	src := `name: req
steps:
  - id: a
    kind: http
    effect_key: "a:{input.id}"
    http:
      method: FETCH
      url: "https://example.com/x"
      headers: {"Bad Header": "x", "Other Bad": "y", X-Ok: "{input.x"}
      classify: [{status: "409", class: fine}]
      verify:
        url: "https://example.com/v"
        headers: {"Third Bad": "z"}
`
	_, ps := testReader.Parse("req.yaml", []byte(src))
	if ps == nil {
		t.Fatal("the file was accepted")
	}
	text := ps.Error()
	// Each at its field: the method, the headers, the classify rules, the verify headers.
	for _, want := range []string{
		`req.yaml:7:15: step "a": method "FETCH" is not one of`,
		`req.yaml:9:16: step "a": header name "Bad Header" is not a valid HTTP header name`,
		`req.yaml:9:16: step "a": header name "Other Bad" is not a valid HTTP header name`,
		`req.yaml:9:16: step "a": header X-Ok: template "{input.x"`,
		`req.yaml:13:18: step "a": verify: header name "Third Bad" is not a valid HTTP header name`,
		`req.yaml:10:17: step "a": classify "409": class "fine"`,
	} {
		if n := strings.Count(text, want); n != 1 {
			t.Errorf("problems say %q %d times, want once:\n%s", want, n, text)
		}
	}
}

// {+field} belongs in URLs; in a key, a header or a body it is a mistake worth reporting.
func TestRawSpliceOnlyInURLs(t *testing.T) {
	src := `name: raw
entity: "lead:{+input.id}"
steps:
  - id: a
    kind: http
    effect_key: "a:{+input.id}"
    http:
      url: "https://example.com/{+input.path}"
      headers: {X-Id: "{+input.id}"}
      verify: {url: "https://example.com/{+input.path}"}
`
	_, ps := testReader.Parse("raw.yaml", []byte(src))
	text := ps.Error()
	if len(ps) != 3 || !strings.Contains(text, "raw.yaml:2:") || !strings.Contains(text, "raw.yaml:6:") || !strings.Contains(text, "header X-Id") {
		t.Fatalf("problems:\n%s", text)
	}
}

// nestedBody is a workflow file whose http step's body nests levels deep, written in one
// of the ways YAML nests lists and mappings.
func nestedBody(shape string, levels int) string {
	var b strings.Builder
	b.WriteString("name: deep\nsteps:\n  - id: a\n    kind: http\n    effect_key: \"k:{input.id}\"\n    http:\n      url: \"https://example.com\"\n      body:\n")
	switch shape {
	case "flow lists":
		b.WriteString("        x: " + strings.Repeat("[", levels) + "1" + strings.Repeat("]", levels) + "\n")
	case "flow mappings":
		b.WriteString("        x: " + strings.Repeat("{a: ", levels) + "1" + strings.Repeat("}", levels) + "\n")
	case "block lists on one line":
		b.WriteString("        x:\n          " + strings.Repeat("- ", levels) + "1\n")
	case "block mappings by indentation":
		for i := range levels {
			b.WriteString(strings.Repeat(" ", 8+i) + "a:\n")
		}
		b.WriteString(strings.Repeat(" ", 8+levels) + "1\n")
	case "lists of mappings at their keys' column":
		b.WriteString("        x:\n")
		for i := range levels / 2 {
			b.WriteString(strings.Repeat("  ", 4+i) + "- a:\n")
		}
		b.WriteString(strings.Repeat("  ", 5+levels/2) + "1\n")
	}
	return b.String()
}

var nestingShapes = []string{"flow lists", "flow mappings", "block lists on one line", "block mappings by indentation",
	"lists of mappings at their keys' column"}

// A file nested far deeper than MaxDepth is refused at the token past the limit, before
// the YAML parser builds its tree: 20 KB of "[[[…" took 357 MB, and a 100 KB file in the
// workflows directory took a reload down.
func TestDeepNestingIsRefused(t *testing.T) {
	for _, shape := range nestingShapes {
		levels := 10_000
		if strings.HasPrefix(shape, "block mappings") || strings.HasPrefix(shape, "lists of mappings") {
			levels = 200 // each level is indented further: 20 KB
		}
		src := nestedBody(shape, levels)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d, ps := testReader.Parse("deep.yaml", []byte(src))
		runtime.ReadMemStats(&after)
		if d != nil || len(ps) != 1 || !strings.Contains(ps[0].Message, "nest more than 64 levels") || ps[0].Line < 9 || ps[0].Col == 0 {
			t.Errorf("%s, %d levels: Parse = %v, %v; want one problem about the nesting, at a line and column of the body", shape, levels, d, ps)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
			t.Errorf("%s: refusing a %d-byte file allocated %d MB", shape, len(src), got>>20)
		}
	}
}

// Nesting within MaxDepth is fine, and text is not nesting: a block scalar indented
// deeper and deeper, brackets in quotes and a flow list over several lines are values.
func TestNestingWithinTheLimitIsAccepted(t *testing.T) {
	for _, shape := range nestingShapes {
		src := nestedBody(shape, 50)
		if _, ps := testReader.Parse("deep.yaml", []byte(src)); ps != nil {
			t.Errorf("%s, 50 levels: %v", shape, ps)
		}
	}
	var text strings.Builder
	for i := range 300 {
		text.WriteString(strings.Repeat(" ", 10+i) + "<div>\n")
	}
	src := "name: text\nsteps:\n  - id: a\n    kind: http\n    effect_key: \"k:{input.id}\"\n    http:\n      url: \"https://example.com\"\n      body:\n" +
		"        html: |\n" + text.String() +
		"        brackets: \"" + strings.Repeat("[(", 500) + "\"\n" +
		"        quoted: '" + strings.Repeat("[", 500) + "'\n" +
		"        list: [1,\n          2,\n              3]\n"
	if _, ps := testReader.Parse("text.yaml", []byte(src)); ps != nil {
		t.Fatalf("%v", ps)
	}
}

// A file larger than MaxFileSize is refused without being read whole.
func TestLargeFileIsRefused(t *testing.T) {
	valid := "name: big\nsteps:\n  - {id: a, kind: go, func: f}\n"
	pad := func(n int) string {
		line := "# " + strings.Repeat("x", 97) + "\n"
		s := valid + strings.Repeat(line, (n-len(valid))/len(line))
		return s + strings.Repeat("#", n-len(s))
	}
	if _, ps := testReader.Parse("big.yaml", []byte(pad(MaxFileSize))); ps != nil {
		t.Fatalf("a file of exactly MaxFileSize bytes: %v", ps)
	}
	d, ps := testReader.Parse("big.yaml", []byte(pad(MaxFileSize+1)))
	if d != nil || len(ps) != 1 || !strings.Contains(ps[0].Message, "more than 262144 bytes (256 KiB)") {
		t.Fatalf("Parse = %v, %v; want the file refused for its size", d, ps)
	}
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(pad(20<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := testReader.LoadFiles(path)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), path+": the file holds more than") {
		t.Fatalf("LoadFiles of a 20 MB file: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("refusing a 20 MB file allocated %d MB", got>>20)
	}
}

// A file of more than MaxNodes values is refused before it is parsed, saying so (it was
// parsed, at 140 MB for 240 KB, and then refused for aliases it does not have).
func TestManyValuesAreRefused(t *testing.T) {
	src := "name: w\nsteps:\n  - id: a\n    kind: http\n    effect_key: \"k:{input.id}\"\n    http:\n      url: \"https://example.com\"\n" +
		"      body: [" + strings.Repeat("1,", MaxNodes) + "1]\n"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d, ps := testReader.Parse("many.yaml", []byte(src))
	runtime.ReadMemStats(&after)
	if d != nil || len(ps) != 1 || !strings.Contains(ps[0].Message, "holds more than 100000 values") || ps[0].Line != 8 {
		t.Fatalf("Parse = %v, %v; want one problem about the number of values at line 8", d, ps)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 96<<20 {
		t.Fatalf("refusing a %d-byte file allocated %d MB", len(src), got>>20)
	}
}

// An html: true e-mail body is checked where each field lands: {+field} splices raw HTML
// in its text, a field inside a tag or in a script is refused; a plain-text body, like
// every other e-mail field, has no use for {+field}.
func TestEmailHTMLBodyIsChecked(t *testing.T) {
	src := `name: mail
steps:
  - id: ok
    kind: email
    effect_key: "ok:{input.id}"
    email:
      from: shop@example.com
      to: "{input.email}"
      subject: "Order {input.id}"
      html: true
      body: '<p>Dear {input.name}</p><a href="https://shop.example/o/{input.id}">order</a>{+input.banner}'
  - id: attr
    kind: email
    effect_key: "attr:{input.id}"
    email:
      from: shop@example.com
      to: "{input.email}"
      subject: "Order {input.id}"
      html: true
      body: '<p onclick="{input.x}">x</p>'
  - id: plain
    kind: email
    effect_key: "plain:{input.id}"
    email: {from: shop@example.com, to: "{input.email}", subject: "{+input.id}", body: "Hello {+input.name}"}
`
	_, ps := testReader.Parse("mail.yaml", []byte(src))
	text := ps.Error()
	for _, want := range []string{
		`mail.yaml:20:13: step "attr": email body: template "<p onclick=\"{input.x}\">x</p>": field {input.x}: a value may not stand in the onclick attribute`,
		`mail.yaml:24:88: step "plain": email body: {+field} splices raw HTML, which only the body of an html: true message may hold`,
		`mail.yaml:24:67: step "plain": email subject: {+field} splices raw HTML`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("problems do not say %q:\n%s", want, text)
		}
	}
	if len(ps) != 3 {
		t.Errorf("%d problems, want 3 (step ok has none):\n%s", len(ps), text)
	}
}
