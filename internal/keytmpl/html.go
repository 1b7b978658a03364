package keytmpl

import (
	"fmt"
	"html"
	"net/url"
	"strings"
)

// HTML is a template compiled for an HTML document, such as an e-mail body: the template's
// literal text is the author's HTML, and each field is escaped for the place of that HTML
// it lands in, as html/template escapes (which cannot serve here: it removes the
// comments Outlook's conditional markup lives in):
//
//   - in text, in an element such as <title>, or in a comment, the value is text: "<" and
//     "&" arrive as "&lt;" and "&amp;", so a value can never add an element or a link;
//   - in a quoted attribute value it is that value's text, quotes escaped;
//   - in a URL attribute (href, src, action, …) it is a part of the URL: at the start of
//     the value it must be an absolute http, https or mailto URL (no "javascript:"); after
//     a fixed beginning it is encoded for the part of the URL it lands in, as RenderURL
//     does, so that it cannot change where the link goes.
//
// {env.NAME} is the operator's configuration and is not checked for a scheme, but is
// escaped all the same. A field written {+field} splices raw HTML, in text only; a field
// anywhere else — between a tag's attributes, in an unquoted attribute value, in a
// script, a style or an event handler — is a compile error, since no escaping makes a
// value safe there.
type HTML struct {
	t      *Template
	fields []htmlField // one per field part, in order
}

// htmlField is where a field lands.
type htmlField struct {
	url    bool   // in a URL attribute's value
	start  bool   // first in that value: the value decides the URL's scheme
	encode string // "path", "query" or "fragment" for a URL field after a fixed beginning
	raw    bool   // {+field}: spliced as it is
}

// htmlState is where the HTML tokenizer stands.
type htmlState int

const (
	htmlText      htmlState = iota
	htmlTagOpen             // after "<"
	htmlTagName             // in "<name" or "</name"
	htmlInTag               // between attributes
	htmlAttrName            // in an attribute's name
	htmlAfterName           // after a name, before "=" or the next attribute
	htmlBeforeVal           // after "="
	htmlValueDQ             // in a "…" value
	htmlValueSQ             // in a '…' value
	htmlValueUnq            // in an unquoted value
	htmlComment             // in <!-- … -->
	htmlDecl                // in <!…> or <?…>
	htmlRawText             // in <script>, <style> and the like: text up to </name
	htmlRCData              // in <title> or <textarea>: text up to </name
)

// rawTextTags hold text that is not HTML and cannot be escaped as HTML; rcdataTags hold
// text in which entities work.
var (
	rawTextTags = map[string]bool{"script": true, "style": true, "xmp": true, "iframe": true, "noembed": true, "noframes": true, "noscript": true, "plaintext": true}
	rcdataTags  = map[string]bool{"title": true, "textarea": true}
	urlAttrs    = map[string]bool{"href": true, "src": true, "action": true, "formaction": true, "cite": true, "background": true,
		"poster": true, "longdesc": true, "usemap": true, "codebase": true, "data": true, "manifest": true, "profile": true,
		"icon": true, "ping": true, "lowsrc": true, "dynsrc": true, "srcset": true, "xlink:href": true, "archive": true, "classid": true}
)

// htmlScanner follows the author's HTML around the fields.
type htmlScanner struct {
	state   htmlState
	tag     strings.Builder // the tag being read
	end     bool            // it is an end tag
	open    string          // the raw text or RCDATA element we are in
	attr    strings.Builder // the attribute being read
	value   strings.Builder // the literal text of the attribute value so far
	fields  int             // fields in the value so far
	spliced bool            // a field in the value was spliced unencoded (a URL, {env.…})
	pending string          // the last few bytes, to find "-->" and "</name"
}

// HTML compiles t for an HTML document. Its error says where a field may not stand.
func (t *Template) HTML() (*HTML, error) {
	h := &HTML{t: t}
	var sc htmlScanner
	for _, p := range t.parts {
		if p.path == nil {
			sc.feed(p.lit)
			continue
		}
		f, err := sc.field(p)
		if err != nil {
			return nil, fmt.Errorf("template %q: field {%s%s}: %w", t.src, map[bool]string{true: "+"}[p.raw], strings.Join(p.path, "."), err)
		}
		h.fields = append(h.fields, f)
	}
	return h, nil
}

// field says how the field p is escaped where the scanner stands.
func (sc *htmlScanner) field(p part) (htmlField, error) {
	env := p.path[0] == "env"
	if p.raw && sc.state != htmlText {
		return htmlField{}, fmt.Errorf("{+field} splices raw HTML, which may stand only in text, not %s; write {field} to have the value escaped", sc.where())
	}
	switch sc.state {
	case htmlText, htmlRCData, htmlComment:
		return htmlField{raw: p.raw}, nil
	case htmlValueDQ, htmlValueSQ:
	default:
		return htmlField{}, fmt.Errorf("a value may not stand %s: no escaping makes it safe there", sc.where())
	}
	attr := strings.ToLower(sc.attr.String())
	tag := strings.ToLower(sc.tag.String())
	switch {
	case strings.HasPrefix(attr, "on"), attr == "style", attr == "srcdoc", tag == "meta" && attr == "content":
		return htmlField{}, fmt.Errorf("a value may not stand in the %s attribute (a script, a style or markup of its own): no escaping makes it safe there", attr)
	case !urlAttrs[attr]:
		sc.fields++
		return htmlField{}, nil
	}
	f := htmlField{url: true}
	lit := sc.value.String()
	switch {
	case sc.fields == 0 && strings.TrimSpace(lit) == "":
		f.start = !env
		sc.spliced = true
	case sc.spliced:
		f.encode = "query" // after a URL or {env.…}: its query may be open; encode the most
	case strings.ContainsRune(lit, '#'):
		f.encode = "fragment"
	case strings.ContainsRune(lit, '?'):
		f.encode = "query"
	case !strings.ContainsAny(lit, ":/"):
		return htmlField{}, fmt.Errorf("in the %s attribute, %q may still be the start of the URL's scheme; a value goes at the start of the URL or after a fixed beginning such as https://shop.example/", attr, lit)
	default:
		f.encode = "path"
	}
	sc.fields++
	return f, nil
}

// where names the scanner's place for an error.
func (sc *htmlScanner) where() string {
	switch sc.state {
	case htmlText:
		return "in text"
	case htmlRCData:
		return "in <" + sc.open + ">"
	case htmlComment:
		return "in a comment"
	case htmlValueDQ, htmlValueSQ:
		return "in the value of the " + strings.ToLower(sc.attr.String()) + " attribute"
	case htmlValueUnq:
		return "in the unquoted value of the " + strings.ToLower(sc.attr.String()) + " attribute (quote the value)"
	case htmlRawText:
		return "in <" + sc.open + ">"
	case htmlDecl:
		return "in a <!…> declaration"
	}
	return "inside a tag, outside a quoted attribute value"
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// feed moves the scanner over literal HTML, following the HTML tokenizer's states closely
// enough to know what a field after it lands in.
func (sc *htmlScanner) feed(s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		sc.pending += string(c)
		if len(sc.pending) > 16 {
			sc.pending = sc.pending[len(sc.pending)-16:]
		}
		switch sc.state {
		case htmlText:
			if c == '<' {
				sc.state = htmlTagOpen
			}
		case htmlTagOpen:
			switch {
			case isLetter(c):
				sc.state, sc.end = htmlTagName, false
				sc.tag.Reset()
				sc.tag.WriteByte(c)
			case c == '/' && i+1 < len(s) && isLetter(s[i+1]):
				sc.state, sc.end = htmlTagName, true
				sc.tag.Reset()
			case c == '!' && strings.HasPrefix(s[i:], "!--"):
				sc.state = htmlComment
				sc.pending = ""
				i += 2
			case c == '!' || c == '?':
				sc.state = htmlDecl
			case c == '<':
			default:
				sc.state = htmlText
			}
		case htmlTagName:
			switch {
			case isSpace(c) || c == '/':
				sc.state = htmlInTag
			case c == '>':
				sc.closeTag()
			default:
				sc.tag.WriteByte(c)
			}
		case htmlInTag, htmlAfterName:
			switch {
			case isSpace(c) || c == '/':
			case c == '>':
				sc.closeTag()
			case c == '=' && sc.state == htmlAfterName:
				sc.state = htmlBeforeVal
			default:
				sc.state = htmlAttrName
				sc.attr.Reset()
				sc.attr.WriteByte(c)
			}
		case htmlAttrName:
			switch {
			case isSpace(c) || c == '/':
				sc.state = htmlAfterName
			case c == '=':
				sc.state = htmlBeforeVal
			case c == '>':
				sc.closeTag()
			default:
				sc.attr.WriteByte(c)
			}
		case htmlBeforeVal:
			sc.value.Reset()
			sc.fields, sc.spliced = 0, false
			switch {
			case isSpace(c):
			case c == '"':
				sc.state = htmlValueDQ
			case c == '\'':
				sc.state = htmlValueSQ
			case c == '>':
				sc.closeTag()
			default:
				sc.state = htmlValueUnq
				sc.value.WriteByte(c)
			}
		case htmlValueDQ, htmlValueSQ:
			if c == '"' && sc.state == htmlValueDQ || c == '\'' && sc.state == htmlValueSQ {
				sc.state = htmlInTag
			} else {
				sc.value.WriteByte(c)
			}
		case htmlValueUnq:
			switch {
			case isSpace(c):
				sc.state = htmlInTag
			case c == '>':
				sc.closeTag()
			default:
				sc.value.WriteByte(c)
			}
		case htmlComment:
			if c == '>' && (strings.HasSuffix(sc.pending, "-->") || strings.HasSuffix(sc.pending, "--!>")) {
				sc.state = htmlText
			}
		case htmlDecl:
			if c == '>' {
				sc.state = htmlText
			}
		case htmlRawText, htmlRCData:
			// The element ends at "</name" followed by a space, "/" or ">".
			closing := "</" + sc.open
			if isSpace(c) || c == '/' || c == '>' {
				p := strings.ToLower(sc.pending[:len(sc.pending)-1])
				if strings.HasSuffix(p, closing) {
					sc.state, sc.end = htmlTagName, true
					sc.tag.Reset()
					sc.tag.WriteString(sc.open)
					if c == '>' {
						sc.closeTag()
					} else {
						sc.state = htmlInTag
					}
				}
			}
		}
	}
}

// closeTag ends the tag being read: the text after a start tag of a raw text or RCDATA
// element is that element's.
func (sc *htmlScanner) closeTag() {
	name := strings.ToLower(sc.tag.String())
	sc.state = htmlText
	if sc.end {
		return
	}
	switch {
	case rawTextTags[name]:
		sc.state, sc.open = htmlRawText, name
	case rcdataTags[name]:
		sc.state, sc.open = htmlRCData, name
	}
	sc.pending = ""
}

// Render fills the template from data, each field escaped for where it lands. A missing
// field is a *FieldError, as for Render; so is a link that is not an http, https or
// mailto URL where a URL begins.
func (h *HTML) Render(data map[string]any) (string, error) {
	var b strings.Builder
	n := 0
	for _, p := range h.t.parts {
		if p.path == nil {
			b.WriteString(p.lit)
			continue
		}
		f := h.fields[n]
		n++
		v, err := h.t.lookup(data, p.path)
		if err != nil {
			return "", err
		}
		switch {
		case f.raw:
			b.WriteString(v)
		case f.start:
			if !safeURL(v) {
				return "", &FieldError{Template: h.t.src, Field: strings.Join(p.path, "."),
					Problem: "is not an http, https or mailto URL; a link from the run's data must be one"}
			}
			b.WriteString(html.EscapeString(v))
		case f.url && p.path[0] == "env":
			b.WriteString(html.EscapeString(v))
		case f.encode == "query":
			b.WriteString(html.EscapeString(url.QueryEscape(v)))
		case f.encode == "fragment":
			b.WriteString(html.EscapeString(url.PathEscape(v)))
		case f.encode == "path" && (v == "." || v == ".."):
			b.WriteString(strings.Repeat("%2E", len(v)))
		case f.encode == "path":
			b.WriteString(html.EscapeString(url.PathEscape(v)))
		default:
			b.WriteString(html.EscapeString(v))
		}
	}
	return b.String(), nil
}

// safeURL reports whether v is an absolute http, https or mailto URL.
func safeURL(v string) bool {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return u.Host != ""
	case "mailto":
		return u.Opaque != ""
	}
	return false
}
