package keytmpl

import (
	"errors"
	"strings"
	"testing"
)

func htmlData(t *testing.T) map[string]any {
	t.Helper()
	in, err := Decode([]byte(`{"name": "<a href=\"https://evil.example/login\">Your account is locked</a>",
		"quote": "x\" onmouseover=\"alert(1)", "apos": "x' onmouseover='alert(1)", "js": "javascript:alert(1)",
		"link": "https://shop.example/orders/7?a=1&b=2", "path": "../admin?x=1#f", "q": "a&b=c d", "dot": "..",
		"close": "--><script>alert(1)</script>", "end": "</textarea><script>x</script>", "b": "<b>bold</b>",
		"mail": "mailto:ana@example.com", "spaced": "  JavaScript:alert(1)"}`))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"input": in, "env": map[string]any{"BASE": "https://shop.example/a?b=1&c=2"}}
}

// Each field of an HTML template is escaped for the HTML it lands in; a value can neither
// add an element, nor leave the attribute it is in, nor turn a link into another scheme.
func TestHTMLEscapesByContext(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`<p>Hello {input.name}</p>`, `<p>Hello &lt;a href=&#34;https://evil.example/login&#34;&gt;Your account is locked&lt;/a&gt;</p>`},
		{`<p title="{input.quote}">x</p>`, `<p title="x&#34; onmouseover=&#34;alert(1)">x</p>`},
		{`<p title='{input.apos}'>x</p>`, `<p title='x&#39; onmouseover=&#39;alert(1)'>x</p>`},
		{`<a href="{input.link}">order</a>`, `<a href="https://shop.example/orders/7?a=1&amp;b=2">order</a>`},
		{`<a href="{input.mail}">write</a>`, `<a href="mailto:ana@example.com">write</a>`},
		{`<a href="https://shop.example/orders/{input.path}">o</a>`, `<a href="https://shop.example/orders/..%2Fadmin%3Fx=1%23f">o</a>`},
		{`<a href="https://shop.example/o/{input.dot}">o</a>`, `<a href="https://shop.example/o/%2E%2E">o</a>`},
		{`<a href="https://shop.example/search?q={input.q}">s</a>`, `<a href="https://shop.example/search?q=a%26b%3Dc+d">s</a>`},
		{`<a href="https://shop.example/#{input.q}">s</a>`, `<a href="https://shop.example/#a&amp;b=c%20d">s</a>`},
		{`<a href="{env.BASE}&amp;id={input.q}">s</a>`, `<a href="https://shop.example/a?b=1&amp;c=2&amp;id=a%26b%3Dc+d">s</a>`},
		{`<a href="{input.link}&amp;tail={input.path}">s</a>`, `<a href="https://shop.example/orders/7?a=1&amp;b=2&amp;tail=..%2Fadmin%3Fx%3D1%23f">s</a>`},
		{`<!--[if mso]><p>{input.close}</p><![endif]-->`, `<!--[if mso]><p>--&gt;&lt;script&gt;alert(1)&lt;/script&gt;</p><![endif]-->`},
		{`<textarea>{input.end}</textarea>`, `<textarea>&lt;/textarea&gt;&lt;script&gt;x&lt;/script&gt;</textarea>`},
		{`<style>p {{ color: red }}</style><p>{input.b}</p>`, `<style>p { color: red }</style><p>&lt;b&gt;bold&lt;/b&gt;</p>`},
		{`<script src="https://cdn.example/x.js"></script><p>{input.b}</p>`, `<script src="https://cdn.example/x.js"></script><p>&lt;b&gt;bold&lt;/b&gt;</p>`},
		{`<p>{+input.b}</p>`, `<p><b>bold</b></p>`},
		{`<p>a > b</p><p>{input.b}</p>`, `<p>a > b</p><p>&lt;b&gt;bold&lt;/b&gt;</p>`},
	} {
		tpl, err := Parse(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		h, err := tpl.HTML()
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		got, err := h.Render(htmlData(t))
		if err != nil || got != tc.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tc.src, got, err, tc.want)
		}
	}
}

// A link from the run's data where a URL begins must be http, https or mailto.
func TestHTMLRefusesOtherSchemes(t *testing.T) {
	for _, field := range []string{"js", "spaced", "path", "q"} {
		tpl, _ := Parse(`<a href="{input.` + field + `}">x</a>`)
		h, err := tpl.HTML()
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Render(htmlData(t))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "input."+field || !strings.Contains(err.Error(), "is not an http, https or mailto URL") {
			t.Errorf("href from input.%s: %v", field, err)
		}
	}
}

// A field where no escaping makes it safe is refused when the template is compiled.
func TestHTMLRefusesUnsafePlaces(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`<a {input.x}>`, "inside a tag, outside a quoted attribute value"},
		{`<a href={input.x}>`, "inside a tag"},
		{`<a title=x{input.x}>`, "unquoted value of the title attribute (quote the value)"},
		{`<{input.x}>`, "inside a tag"},
		{`<p onclick="go({input.x})">`, "in the onclick attribute"},
		{`<p style="color: {input.x}">`, "in the style attribute"},
		{`<script>var x = "{input.x}";</script>`, "in <script>"},
		{`<STYLE>p {{ color: {input.x} }}</STYLE>`, "in <style>"},
		{`<a href="java{input.x}">`, `"java" may still be the start of the URL's scheme`},
		{`<a title="{+input.x}">`, "{+field} splices raw HTML, which may stand only in text"},
		{`<!-- {+input.x} -->`, "{+field} splices raw HTML"},
		{`<meta http-equiv="refresh" content="0; url={input.x}">`, "in the content attribute"},
		{`<!DOCTYPE {input.x}>`, "in a <!…> declaration"},
	} {
		tpl, err := Parse(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tpl.HTML(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.src, err, tc.want)
		}
	}
	// After the element ends, text is text again.
	for _, src := range []string{`<script>x</script ><p>{input.x}</p>`, `<style>p {{}}</style><p title="{input.x}">`, `<title>{input.x}</title>`} {
		tpl, _ := Parse(src)
		if _, err := tpl.HTML(); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}
