package keytmpl

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// escape writes s as a template with no fields: braces doubled.
func escape(s string) string {
	return strings.NewReplacer("{", "{{", "}", "}}").Replace(s)
}

// setPath puts v at the dotted path in data; false when the path crosses a value that is
// not an object or would replace an object (two fields such as a.b and a.b.c).
func setPath(data map[string]any, path []string, v any) bool {
	cur := data
	for i, seg := range path {
		if i == len(path)-1 {
			if _, isMap := cur[seg].(map[string]any); isMap {
				return false
			}
			if old, ok := cur[seg]; ok && old != v {
				return false
			}
			cur[seg] = v
			return true
		}
		next, ok := cur[seg]
		if !ok {
			m := map[string]any{}
			cur[seg] = m
			cur = m
			continue
		}
		if cur, ok = next.(map[string]any); !ok {
			return false
		}
	}
	return true
}

// FuzzTemplate checks the key and request templates on any source, data and literal:
// parsing, rendering and step parsing never panic; a parsed template keeps its source;
// a literal with its braces doubled renders to itself; a template whose fields are all
// given a value renders, with each field's value in place; and a field that cannot be
// rendered is a *FieldError naming it.
func FuzzTemplate(f *testing.F) {
	for _, s := range []struct{ src, data, lit string }{
		{"lead-create:{input.submission_id}", `{"input":{"submission_id":8812}}`, "a{b}c"},
		{"{input.a}-{input.b.c}", `{"input":{"a":"x","b":{"c":1.5}}}`, "{{"},
		{"{input.items.0.sku}", `{"input":{"items":[{"sku":"A-1"}]}}`, "}}"},
		{"{{literal}} {input.x}", `{"input":{"x":null}}`, ""},
		{"{env.CRM_TOKEN}", `{"env":{"CRM_TOKEN":"s3cr3t"}}`, "}{"},
		{"{steps.crm.output.id}", `{"steps":{"crm":{"output":{"id":"lead_77"}}}}`, "x"},
		{"{input.}", `{}`, "{input.x}"},
		{"{input", `[]`, "é{}"},
		{"}", `"x"`, "\x00{"},
		{"{input.a b}", `{"input":{"a b":"x"}}`, "{{}}"},
		{"{run.key}{workflow.name}{step.id}", `{"run":{"key":"k"},"workflow":{"name":"w"},"step":{"id":"s"}}`, "%2F"},
		{"{input.list}", `{"input":{"list":[1,2]}}`, "?a=b#c"},
		{"{input.obj}", `{"input":{"obj":{"k":"v"}}}`, "../admin"},
		{"{input.s}", `{"input":{"s":""}}`, "\r\n"},
	} {
		f.Add(s.src, []byte(s.data), s.lit)
	}
	f.Fuzz(func(t *testing.T, src string, rawData []byte, lit string) {
		tmpl, err := Parse(src)
		if err == nil && tmpl.String() != src {
			t.Fatalf("Parse(%q).String() = %q", src, tmpl.String())
		}
		_, _ = ParseStep(src, EnvVars{})

		// A literal with its braces doubled is a template without fields that renders to it.
		lt, err := Parse(escape(lit))
		if err != nil {
			t.Fatalf("Parse(escape(%q)): %v", lit, err)
		}
		if fs := lt.Fields(); len(fs) != 0 {
			t.Fatalf("escaped literal %q has fields %v", lit, fs)
		}
		if got, err := lt.Render(nil); err != nil || got != lit {
			t.Fatalf("escaped literal %q renders to %q, %v", lit, got, err)
		}
		if tmpl == nil {
			return
		}

		// Any data: rendering never panics, and a failure names a field of the template.
		if tree, err := Decode(rawData); err == nil {
			data, _ := tree.(map[string]any)
			for _, render := range []func(map[string]any) (any, error){
				func(d map[string]any) (any, error) { return tmpl.Render(d) },
				tmpl.Value,
			} {
				if _, err := render(data); err != nil {
					var fe *FieldError
					if !errors.As(err, &fe) || !strings.Contains(" "+strings.Join(tmpl.Fields(), " ")+" ", " "+fe.Field+" ") {
						t.Fatalf("rendering %q with %s: %v, want a *FieldError naming one of %v", src, rawData, err, tmpl.Fields())
					}
				}
			}
		}

		// Every field given a value: it renders, each value in place of its field.
		data := map[string]any{}
		var fields []string
		for i, field := range tmpl.Fields() {
			v := "<" + strings.Repeat("v", i+1) + ">"
			if !setPath(data, strings.Split(field, "."), v) {
				return
			}
			fields = append(fields, field)
		}
		got, err := tmpl.Render(data)
		if err != nil {
			t.Fatalf("Render(%q) with every field set: %v", src, err)
		}
		if strings.Contains(src, "{{") || strings.Contains(src, "}}") {
			return // escaped braces: covered by the literal check above
		}
		// Each field, written {field} or {+field} (a raw splice, which Render reads
		// alike), is replaced in order by its value.
		var want strings.Builder
		rest := src
		for _, field := range fields {
			v, _ := tmpl.lookup(data, strings.Split(field, "."))
			i, j := strings.Index(rest, "{"+field+"}"), strings.Index(rest, "{+"+field+"}")
			n := len(field) + 2
			if i < 0 || (j >= 0 && j < i) {
				i, n = j, len(field)+3
			}
			if i < 0 {
				t.Fatalf("field %q not found in %q", field, rest)
			}
			want.WriteString(rest[:i] + v)
			rest = rest[i+n:]
		}
		want.WriteString(rest)
		if got != want.String() {
			t.Fatalf("Render(%q) = %q, want %q", src, got, want.String())
		}
	})
}

// FuzzRenderURL checks that a template value can never change a URL's shape: whatever the
// value, the rendered URL parses, keeps its scheme, host and number of path segments, and
// gives the value back unchanged from the path segment, the query value and the fragment
// it was placed in.
func FuzzRenderURL(f *testing.F) {
	for _, v := range []string{"8812", "../admin", "..", ".", "x?admin=1", "a&b=c", "x#f", "a b+c", "%2e%2e", "/", "é/ü", "a\x00b", "\r\n", ""} {
		f.Add(v)
	}
	tm, err := Parse("https://api.example.com/v1/items/{input.v}/x?q={input.v}&n=1#{input.v}")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := tm.RenderURL(map[string]any{"input": map[string]any{"v": v}})
		if err != nil {
			if v == "" {
				return // an empty value is refused rather than leaving an empty segment
			}
			t.Fatalf("RenderURL(%q): %v", v, err)
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("RenderURL(%q) = %q, which does not parse: %v", v, got, err)
		}
		if u.Scheme != "https" || u.Host != "api.example.com" || u.User != nil {
			t.Fatalf("RenderURL(%q) = %q changed the scheme, host or user", v, got)
		}
		segs := strings.Split(u.EscapedPath(), "/")
		if len(segs) != 5 || segs[4] != "x" {
			t.Fatalf("RenderURL(%q) = %q: path %q has another shape", v, got, u.EscapedPath())
		}
		if seg, err := url.PathUnescape(segs[3]); err != nil || seg != v {
			t.Fatalf("RenderURL(%q) = %q: path segment %q gives back %q (%v)", v, got, segs[3], seg, err)
		}
		q := u.Query()
		if len(q) != 2 || q.Get("q") != v || q.Get("n") != "1" {
			t.Fatalf("RenderURL(%q) = %q: query %v", v, got, q)
		}
		if u.Fragment != v {
			t.Fatalf("RenderURL(%q) = %q: fragment %q", v, got, u.Fragment)
		}
	})
}
