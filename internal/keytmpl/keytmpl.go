// Package keytmpl parses and renders the small templates that derive run keys, entity keys
// and effect keys from a run's data: "lead-create:{input.submission_id}".
//
// A field is a dotted path in braces; "{{" and "}}" stand for literal braces. In a URL, a
// field written {+field} is spliced as it is; every other field but {env.NAME} is encoded
// for the part of the URL it lands in (see Template.RenderURL). Rendering never
// invents a value: a missing or null field, or one that is an object or a list, is an error
// that names the field, so no key is ever empty or partial.
package keytmpl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Template is a parsed template.
type Template struct {
	src   string
	parts []part
}

type part struct {
	lit  string
	path []string // nil for a literal
	raw  bool     // written {+field}: spliced into a URL as it is (see RenderURL)
}

// FieldError says which field of a template could not be rendered and why.
type FieldError struct {
	Template string
	Field    string
	Problem  string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("template %q: field %s %s", e.Template, e.Field, e.Problem)
}

// Parse parses src. Errors give the byte offset of the problem.
func Parse(src string) (*Template, error) {
	t := &Template{src: src}
	var lit strings.Builder
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '{' && i+1 < len(src) && src[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(src) && src[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '}':
			return nil, fmt.Errorf("template %q: unexpected '}' at offset %d (write '}}' for a literal brace)", src, i)
		case c == '{':
			end := strings.IndexByte(src[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("template %q: '{' at offset %d is never closed", src, i)
			}
			field := src[i+1 : i+1+end]
			raw := false
			if f, ok := strings.CutPrefix(field, "+"); ok {
				field, raw = f, true
			}
			path, err := parsePath(field)
			if err != nil {
				return nil, fmt.Errorf("template %q: field at offset %d: %w", src, i, err)
			}
			if lit.Len() > 0 {
				t.parts = append(t.parts, part{lit: lit.String()})
				lit.Reset()
			}
			t.parts = append(t.parts, part{path: path, raw: raw})
			i += end + 1
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, part{lit: lit.String()})
	}
	return t, nil
}

func parsePath(field string) ([]string, error) {
	if field == "" {
		return nil, fmt.Errorf("empty field {}")
	}
	segs := strings.Split(field, ".")
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("field {%s} has an empty path segment", field)
		}
		for _, r := range s {
			if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return nil, fmt.Errorf("field {%s} has %q; use letters, digits, '_' and '-' separated by '.'", field, r)
			}
		}
	}
	return segs, nil
}

// String returns the template's source.
func (t *Template) String() string { return t.src }

// Fields returns the dotted paths the template reads.
func (t *Template) Fields() []string {
	var out []string
	for _, p := range t.parts {
		if p.path != nil {
			out = append(out, strings.Join(p.path, "."))
		}
	}
	return out
}

// Render fills the template from data: a tree of maps, slices and scalars as produced by
// encoding/json with UseNumber. Slices are indexed by decimal path segments.
func (t *Template) Render(data map[string]any) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.lit)
			continue
		}
		v, err := t.lookup(data, p.path)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// RenderFunc fills the template from data as Render does, passing each field's value
// through fn, which returns the text to splice or an error that stops the rendering. A
// caller uses it to check that a value fits where it lands (one token of a subject).
func (t *Template) RenderFunc(data map[string]any, fn func(field, value string) (string, error)) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.lit)
			continue
		}
		v, err := t.lookup(data, p.path)
		if err != nil {
			return "", err
		}
		if v, err = fn(strings.Join(p.path, "."), v); err != nil {
			return "", err
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// Shape returns the template's text with each field replaced by placeholder: what its
// literal parts make of any value.
func (t *Template) Shape(placeholder string) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.lit)
		} else {
			b.WriteString(placeholder)
		}
	}
	return b.String()
}

func (t *Template) lookup(data map[string]any, path []string) (string, error) {
	field := strings.Join(path, ".")
	var cur any = data
	for i, seg := range path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return "", &FieldError{Template: t.src, Field: field, Problem: "is missing"}
			}
			cur = v
		case []any:
			var idx int
			if _, err := fmt.Sscanf(seg, "%d", &idx); err != nil || idx < 0 || idx >= len(c) || fmt.Sprint(idx) != seg {
				return "", &FieldError{Template: t.src, Field: field, Problem: fmt.Sprintf("is missing (%s is a list of %d)", strings.Join(path[:i], "."), len(c))}
			}
			cur = c[idx]
		default:
			return "", &FieldError{Template: t.src, Field: field, Problem: fmt.Sprintf("is missing (%s is not an object)", strings.Join(path[:i], "."))}
		}
	}
	switch v := cur.(type) {
	case nil:
		return "", &FieldError{Template: t.src, Field: field, Problem: "is null"}
	case string:
		if v == "" {
			return "", &FieldError{Template: t.src, Field: field, Problem: "is an empty string"}
		}
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool, int, int64, float64:
		return fmt.Sprint(v), nil
	case map[string]any:
		return "", &FieldError{Template: t.src, Field: field, Problem: "is an object; a key needs a single value"}
	case []any:
		return "", &FieldError{Template: t.src, Field: field, Problem: "is a list; a key needs a single value"}
	default:
		return fmt.Sprint(v), nil
	}
}

// RenderURL fills a URL template from data, encoding each field's value for the part of
// the URL it lands in, so that a value can never change the URL's shape: in the path it
// is one path segment ("../admin" becomes "..%2Fadmin", "x?admin=1" becomes
// "x%3Fadmin=1"); after "?" it is one query value ("a&b=c" becomes "a%26b%3Dc"); after
// "#" it is fragment text. Two kinds of field are spliced as they are: {env.NAME} — the
// operator's own configuration, such as a base URL — and a field written {+field}, an
// explicit raw splice for a value that holds several path segments or a query string of
// its own.
func (t *Template) RenderURL(data map[string]any) (string, error) {
	var b strings.Builder
	query, fragment := false, false
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.lit)
			if strings.IndexByte(p.lit, '#') >= 0 {
				fragment = true
			}
			if strings.IndexByte(p.lit, '?') >= 0 {
				query = true
			}
			continue
		}
		v, err := t.lookup(data, p.path)
		if err != nil {
			return "", err
		}
		switch {
		case p.raw || p.path[0] == "env":
			b.WriteString(v)
			// A raw value may itself open the query or the fragment.
			if strings.IndexByte(v, '#') >= 0 {
				fragment = true
			}
			if strings.IndexByte(v, '?') >= 0 {
				query = true
			}
		case fragment:
			b.WriteString(url.PathEscape(v))
		case query:
			b.WriteString(url.QueryEscape(v))
		case v == "." || v == "..":
			b.WriteString(strings.Repeat("%2E", len(v))) // never a step up the path
		default:
			b.WriteString(url.PathEscape(v))
		}
	}
	return b.String(), nil
}

// Raw reports whether the template has a field written {+field}.
func (t *Template) Raw() bool {
	for _, p := range t.parts {
		if p.raw {
			return true
		}
	}
	return false
}

// Value renders a template that is exactly one field, such as "{input.amount}", to the
// field's own JSON value (a number stays a number, an object stays an object); any other
// template renders to a string. A missing field is a *FieldError, as for Render.
func (t *Template) Value(data map[string]any) (any, error) {
	if len(t.parts) == 1 && t.parts[0].path != nil {
		path := t.parts[0].path
		var cur any = data
		for _, seg := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				return t.Render(data) // lists and errors: let Render explain
			}
			if cur, ok = m[seg]; !ok {
				return nil, &FieldError{Template: t.src, Field: strings.Join(path, "."), Problem: "is missing"}
			}
		}
		if cur == nil {
			return nil, &FieldError{Template: t.src, Field: strings.Join(path, "."), Problem: "is null"}
		}
		return cur, nil
	}
	return t.Render(data)
}
