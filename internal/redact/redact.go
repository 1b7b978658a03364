// Package redact is the one place onceflow masks sensitive data: secrets (API tokens,
// webhook secrets, passwords, the values of {env.NAME}) and configured personal data (PII
// fields such as email or customer.name) are replaced with "[redacted]" before text
// reaches a log line, an audit event, an attempt record or an API answer. Stored run input
// and step outputs stay intact, so that a run can be replayed; only what is shown or
// written about them is masked.
//
// # What is masked
//
// A Masker masks three things:
//
//   - values: every occurrence of a known value in free text (error messages, response
//     excerpts, log attributes), compared without regard to case and also in its JSON-,
//     query- and path-escaped forms. Values shorter than MinLength are ignored: they would
//     mask unrelated text.
//   - fields: in a JSON document, the whole value of a field whose path matches a
//     configured field. A path matches a field whose trailing names are the path, at any
//     depth, ignoring case and list positions: "email" matches every field named email,
//     "customer.name" matches the name inside customer but not the name of a product.
//   - secret-looking names: in a JSON document, the value of a field whose name contains
//     one of DefaultNames (password, secret, token, …) or an extra name fragment.
//
// A Policy holds the global secrets and PII fields and the fields of each workflow, and
// makes the Masker for one run: its values are the secrets plus the values the run's
// documents (input, step outputs) hold at PII fields, so that an e-mail address is masked
// in a destination's error message as well as in the input's email field.
//
// Run keys, entities and effect keys are identifiers and are never masked: build them from
// business ids, not from personal data.
package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Mask replaces whatever is masked.
const Mask = "[redacted]"

// MinLength is the shortest value masked in free text.
const MinLength = 4

// DefaultNames are the name fragments of fields whose values are always masked in JSON
// documents, compared without regard to case.
var DefaultNames = []string{"password", "secret", "token", "authorization", "api_key", "apikey", "card", "cvc", "iban"}

// path is a parsed field path, its names in lower case.
type path []string

// CheckField reports whether f is a usable field path: names separated by dots, none
// empty.
func CheckField(f string) error {
	_, err := parseField(f)
	return err
}

func parseField(f string) (path, error) {
	f = strings.TrimSpace(f)
	if f == "" {
		return nil, errors.New("redact: an empty field path")
	}
	parts := strings.Split(f, ".")
	for _, p := range parts {
		if strings.TrimSpace(p) == "" || strings.ContainsAny(p, "{}[] ") {
			return nil, fmt.Errorf("redact: field path %q: write names separated by dots, such as customer.email", f)
		}
	}
	out := make(path, len(parts))
	for i, p := range parts {
		out[i] = strings.ToLower(p)
	}
	return out, nil
}

func parseFields(list []string) ([]path, error) {
	var out []path
	var errs []error
	for _, f := range list {
		p, err := parseField(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// matches reports whether the trailing names of stack are p.
func (p path) matches(stack []string) bool {
	if len(stack) < len(p) {
		return false
	}
	tail := stack[len(stack)-len(p):]
	for i, name := range p {
		if !strings.EqualFold(tail[i], name) {
			return false
		}
	}
	return true
}

// Options configure a Masker.
type Options struct {
	// Values are masked wherever they appear in text.
	Values []string
	// Fields are PII field paths, masked in JSON documents.
	Fields []string
	// Names are name fragments added to DefaultNames.
	Names []string
}

// Masker masks text and JSON documents. A nil *Masker masks nothing. It is safe for
// concurrent use.
type Masker struct {
	values []string          // longest first
	first  map[byte][]string // values by their first byte, folded to lower case
	fields []path
	names  []string // lower case
}

// NewMasker returns a Masker for o; the error names invalid field paths.
func NewMasker(o Options) (*Masker, error) {
	fields, err := parseFields(o.Fields)
	if err != nil {
		return nil, err
	}
	return newMasker(o.Values, fields, o.Names), nil
}

func newMasker(values []string, fields []path, names []string) *Masker {
	m := &Masker{fields: fields}
	for _, n := range append(append([]string(nil), DefaultNames...), names...) {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			m.names = append(m.names, n)
		}
	}
	m.addValues(values)
	return m
}

// With returns a Masker that also masks values.
func (m *Masker) With(values ...string) *Masker {
	if m == nil {
		m = newMasker(nil, nil, nil)
	}
	n := &Masker{fields: m.fields, names: m.names}
	n.addValues(append(append([]string(nil), m.values...), values...))
	return n
}

// addValues sets the values, with their escaped forms, longest first.
func (m *Masker) addValues(values []string) {
	seen := map[string]bool{}
	var all []string
	add := func(v string) {
		if len(v) >= MinLength && !seen[strings.ToLower(v)] {
			seen[strings.ToLower(v)] = true
			all = append(all, v)
		}
	}
	var parts []string
	for _, v := range values {
		parts = append(parts, v)
		parts = append(parts, urlParts(v)...)
	}
	for _, v := range parts {
		add(v)
		add(jsonEscaped(v, true))
		add(jsonEscaped(v, false))
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
	}
	sort.SliceStable(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	m.values = all
	m.first = map[byte][]string{}
	for _, v := range all {
		b := lower(v[0])
		m.first[b] = append(m.first[b], v)
	}
}

// MinPartLength is the shortest part of a secret URL masked on its own (see urlParts).
const MinPartLength = 8

// urlParts returns the parts of a secret that is a URL which text may show without the
// rest: the URL without its query and fragment (what error messages name), the user
// name and password, and every path segment, query value and fragment that is long
// enough to matter — at least MinPartLength characters and not a plain lower-case word
// such as "services", or at least 20 characters. A secret webhook URL whose path carries
// its token is then masked in "POST https://host/services/T1/B2/XyZ…: connection
// refused" as well as whole.
func urlParts(v string) []string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	var out []string
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		bare := *u
		bare.RawQuery, bare.Fragment, bare.RawFragment, bare.User = "", "", "", nil
		if bare.Path != "" && bare.Path != "/" {
			out = append(out, bare.String())
		}
	}
	return append(out, partsOf(u, func(p string) bool { return len(p) >= 20 || (len(p) >= MinPartLength && !plainWord(p)) })...)
}

// partsOf returns u's password, whatever its length (a password is a secret at any
// length), and those of its user name, path segments, query values and fragment that keep
// accepts.
func partsOf(u *url.URL, keep func(part string) bool) []string {
	var out []string
	add := func(p string) {
		if keep(p) {
			out = append(out, p)
		}
	}
	if u.User != nil {
		add(u.User.Username())
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		add(seg)
	}
	for _, vs := range u.Query() {
		for _, q := range vs {
			add(q)
		}
	}
	add(u.Fragment)
	return out
}

// CredentialParts returns the parts of a URL that look like credentials although the URL
// as a whole is configuration, not a secret (a destination's base URL, shown in error
// messages so that an operator sees where a request went): its password, and every user
// name, path segment, query value and fragment that holds letters and digits and is at
// least MinPartLength characters long, or that is at least 20 characters long and not a
// plain word. A webhook URL read from a variable nobody declared secret
// (".../services/T1/B2/XyZ9…") then shows its host and fixed words, never its token.
func CredentialParts(v string) []string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	return partsOf(u, func(p string) bool {
		return len(p) >= 20 && !plainWord(p) || len(p) >= MinPartLength && letterAndDigit(p)
	})
}

// letterAndDigit reports whether s holds at least one ASCII letter and one digit.
func letterAndDigit(s string) bool {
	var letter, digit bool
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			letter = true
		}
	}
	return letter && digit
}

// plainWord reports whether s is lower-case letters and hyphens only, like the fixed
// parts of an API's paths.
func plainWord(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// jsonEscaped is v as it appears inside a JSON string.
func jsonEscaped(v string, html bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		return v
	}
	s := strings.TrimSuffix(buf.String(), "\n")
	return s[1 : len(s)-1]
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// Empty reports whether m masks no value (it still masks fields in JSON documents).
func (m *Masker) Empty() bool { return m == nil || len(m.values) == 0 }

// Text returns s with every value replaced by Mask.
func (m *Masker) Text(s string) string {
	if m.Empty() || len(s) < MinLength {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		n := m.matchAt(s, i)
		if n == 0 {
			i++
			continue
		}
		if last == 0 && b.Len() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:i])
		b.WriteString(Mask)
		i += n
		last = i
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// matchAt returns the length of the longest value at s[i:], 0 for none.
func (m *Masker) matchAt(s string, i int) int {
	for _, v := range m.first[lower(s[i])] {
		if len(s)-i >= len(v) && strings.EqualFold(s[i:i+len(v)], v) {
			return len(v)
		}
	}
	return 0
}

// Error returns err unchanged when its text holds no value, and otherwise an error with
// the masked text that still matches err's chain with errors.Is and errors.As.
func (m *Masker) Error(err error) error {
	if err == nil || m.Empty() {
		return err
	}
	msg := err.Error()
	masked := m.Text(msg)
	if masked == msg {
		return err
	}
	return &maskedError{msg: masked, err: err}
}

type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// JSON returns the document raw with sensitive fields and values masked. Object keys come
// out sorted and numbers as written. Text that is not JSON comes back as a JSON string of
// its masked text.
func (m *Masker) JSON(raw []byte) json.RawMessage {
	if m == nil || len(bytes.TrimSpace(raw)) == 0 {
		return raw
	}
	v, err := decode(raw)
	if err != nil {
		b, _ := json.Marshal(m.Text(string(raw)))
		return b
	}
	out, err := encode(m.tree(v, nil))
	if err != nil {
		b, _ := json.Marshal(Mask)
		return b
	}
	return out
}

// Tree masks a decoded JSON document (maps, slices, strings, numbers) in place and
// returns it.
func (m *Masker) Tree(v any) any {
	if m == nil {
		return v
	}
	return m.tree(v, nil)
}

func (m *Masker) tree(v any, stack []string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := append(stack, k) // shared: nothing keeps a path, so building one is linear in depth
			if m.sensitive(p) {
				x[k] = Mask
			} else {
				x[k] = m.tree(e, p)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = m.tree(e, stack)
		}
	case string:
		return m.Text(x)
	case json.Number:
		if m.Text(string(x)) != string(x) {
			return Mask
		}
	case float64, int, int64:
		s := fmt.Sprint(x)
		if m.Text(s) != s {
			return Mask
		}
	}
	return v
}

// sensitive reports whether the field at stack is masked whole.
func (m *Masker) sensitive(stack []string) bool {
	for _, f := range m.fields {
		if f.matches(stack) {
			return true
		}
	}
	name := strings.ToLower(stack[len(stack)-1])
	for _, n := range m.names {
		if strings.Contains(name, n) {
			return true
		}
	}
	return false
}

// Excerpt returns at most max bytes of a destination's answer (max <= 0: no limit),
// masked as a JSON document when it is one and as text otherwise, cut on a character
// boundary and marked with "…" when cut.
func (m *Masker) Excerpt(body []byte, max int) string {
	var text string
	if len(bytes.TrimSpace(body)) > 0 && json.Valid(body) {
		text = string(m.JSON(body))
	} else {
		text = m.Text(string(body))
	}
	return Trim(strings.ToValidUTF8(text, "\uFFFD"), max)
}

// Trim cuts s to at most max bytes on a character boundary, adding "…" when it cuts;
// max <= 0 keeps s whole.
func Trim(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// collect appends the values held at m's fields in the document raw: string leaves, and
// numbers as written.
func (m *Masker) collect(raw []byte, out []string) []string {
	if len(m.fields) == 0 || len(bytes.TrimSpace(raw)) == 0 {
		return out
	}
	v, err := decode(raw)
	if err != nil {
		return out
	}
	var walk func(v any, stack []string, inside bool)
	walk = func(v any, stack []string, inside bool) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := append(stack, k) // shared: nothing keeps a path, so building one is linear in depth
				in := inside
				if !in {
					for _, f := range m.fields {
						if f.matches(p) {
							in = true
							break
						}
					}
				}
				walk(e, p, in)
			}
		case []any:
			for _, e := range x {
				walk(e, stack, inside)
			}
		case string:
			if inside {
				out = append(out, x)
			}
		case json.Number:
			if inside {
				out = append(out, string(x))
			}
		}
	}
	walk(v, nil, false)
	return out
}

func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("redact: trailing data after the JSON value")
	}
	return v, nil
}

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Policy is what is sensitive for a whole process: secrets, global PII fields, and the PII
// fields of each workflow. A nil *Policy masks only DefaultNames. It is safe for
// concurrent use.
type Policy struct {
	secrets *Masker
	fields  []path

	mu        sync.RWMutex
	workflows map[string][]path
}

// New returns a Policy that masks secrets everywhere and the PII fields fields in every
// workflow; the error names invalid field paths.
func New(secrets, fields []string) (*Policy, error) {
	fs, err := parseFields(fields)
	if err != nil {
		return nil, err
	}
	return &Policy{secrets: newMasker(secrets, nil, nil), fields: fs, workflows: map[string][]path{}}, nil
}

// SetWorkflow sets the PII fields of a workflow, in addition to the global ones.
func (p *Policy) SetWorkflow(name string, fields []string) error {
	fs, err := parseFields(fields)
	if err != nil {
		return fmt.Errorf("workflow %q: %w", name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.workflows[name] = fs
	return nil
}

// Secrets returns the Masker of the secrets alone, for text about no particular run.
func (p *Policy) Secrets() *Masker {
	if p == nil {
		return newMasker(nil, nil, nil)
	}
	return p.secrets
}

// ForRun returns the Masker for text and documents about one run of workflow: the
// secrets, the global and the workflow's PII fields, and the values docs (the run's input,
// its steps' outputs) hold at those fields.
func (p *Policy) ForRun(workflow string, docs ...[]byte) *Masker {
	if p == nil {
		return newMasker(nil, nil, nil)
	}
	p.mu.RLock()
	fields := append(append([]path(nil), p.fields...), p.workflows[workflow]...)
	p.mu.RUnlock()
	if len(fields) == 0 {
		return p.secrets // nothing to collect: the secrets alone
	}
	m := &Masker{fields: fields, names: p.secrets.names}
	values := append([]string(nil), p.secrets.values...)
	for _, d := range docs {
		values = m.collect(d, values)
	}
	m.addValues(values)
	return m
}
