// Package block is what the package that reads workflow files (flowfile) shares with the
// plug-ins that own parts of a file — step kinds (package steps), notification channels
// and triggers: the settings of one block, with where it is in the file; the one walk a
// plug-in makes over what it decoded, reporting problems, templates and environment
// variables; and the file's duration syntax.
//
// A plug-in never sees the rest of the file. It decodes its block with Settings.Decode,
// strictly (an unknown field or a value of the wrong type is a decoding error that stops
// the file, at its line and column), and reports everything else it finds wrong through a
// Walker, with paths relative to its block ("url", "headers.X-Api-Key",
// "statements[0].args[1]"). The templates it reads go through Walker.Template, which
// checks what they may read (earlier steps' outputs, run fields, the environment) and
// records the environment variables they need; variables it names directly (a database's
// DSN variable) go through Walker.EnvVar. The same records give the environment a
// program must set to serve the file and the values it must mask.
package block

import (
	"fmt"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/onceflow/onceflow/internal/duration"
)

// Settings is one block of a workflow file: a step's kind settings, a notify channel's, a
// trigger's. The zero value is an absent block.
type Settings struct {
	node   ast.Node
	path   string
	decode func(v any) error
}

// New returns the settings held by node, which sits at path ("$.steps[2].http") of its
// file. decode, when set, decodes node strictly with the decoder reading the file, so that
// anchors defined elsewhere in the file resolve; nil decodes node on its own. Package
// flowfile makes the settings of the files it reads; a plug-in's tests use FromYAML.
func New(node ast.Node, path string, decode func(v any) error) Settings {
	return Settings{node: node, path: path, decode: decode}
}

// FromYAML returns the settings a YAML document holds, at path "$": a block written out in
// a test.
func FromYAML(src string) (Settings, error) {
	f, err := parser.ParseBytes([]byte(src), 0)
	if err != nil {
		return Settings{}, err
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return Settings{}, fmt.Errorf("the document is empty")
	}
	return New(f.Docs[0].Body, "$", nil), nil
}

// Decode decodes the block into v (a pointer), refusing fields v does not have. Its error
// carries the line and column of the value at fault; a plug-in returns it as it is.
func (s Settings) Decode(v any) error {
	if s.node == nil {
		return nil
	}
	if s.decode != nil {
		return s.decode(v)
	}
	return yaml.NodeToValue(s.node, v, yaml.Strict())
}

// Path is where the block is in its file, as a YAML path ("$.queue"), or "" where the
// reader does not say: the blocks of steps and notify channels are decoded before their
// place in the file is known. A kind reports problems with paths relative to its block
// (Walker) and never needs its own.
func (s Settings) Path() string { return s.path }

// IsZero reports whether the block is absent.
func (s Settings) IsZero() bool { return s.node == nil }

// Has reports whether the block is a mapping that sets field.
func (s Settings) Has(field string) bool {
	n := s.node
	if a, ok := n.(*ast.AnchorNode); ok {
		n = a.Value
	}
	var pairs []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		pairs = m.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{m}
	}
	for _, p := range pairs {
		if p.Key != nil && p.Key.GetToken() != nil && p.Key.GetToken().Value == field {
			return true
		}
	}
	return false
}

// Walker receives what a plug-in's Walk finds in its block. Paths are relative to the block:
// "" is the block itself, "url" a field, "headers.X-Key" a key of a mapping,
// "statements[0].args[1]" an element of a list; a path that names nothing in the file is
// reported at the nearest part of it that does.
type Walker interface {
	// Problem reports something wrong at path; the message says what to fix. The reader
	// adds who it is about (`step "crm": `) and where (file:line:col).
	Problem(path, format string, args ...any)
	// Template reports a template the block holds (a key, a URL, a message field) and how
	// it is used: the reader checks what it reads — a step only reads the outputs of steps
	// it needs, {run.key} and {run.id}, and the environment only where use allows it — and
	// records the environment variables it needs.
	Template(path, src string, use Use)
	// EnvVar reports an environment variable the block names directly, such as the
	// variable holding a database's DSN.
	EnvVar(path, name string, use EnvUse)
}

// Use says how a template is used, which decides what it may read and how its problems
// read.
type Use struct {
	// Label names the template in messages: "url", "verify header X-Key", "email to".
	Label string
	// Env lets the template read {env.NAME} (a request's URL and headers); without it,
	// reading the environment is a problem (keys, entities).
	Env bool
	// EnvOnly lets the template read nothing but {env.NAME}: a notification channel's
	// destination does not depend on the run.
	EnvOnly bool
	// URL lets the template splice a value as it is with {+field}, into a URL.
	URL bool
	// HTML parses the template as the HTML of a message: each field is escaped for where
	// it stands, and {+field} splices raw HTML in text.
	HTML bool
	// Text is a field of a message people read (an e-mail's subject): {+field} is
	// refused as raw HTML, which only an HTML body may hold.
	Text bool
	// Secret marks the variables the template reads as secrets, masked whole wherever
	// text leaves onceflow (a Slack webhook URL is a credential).
	Secret bool
	// ReportParse reports a template that does not parse; false when the plug-in
	// reported it itself.
	ReportParse bool
}

// EnvUse says how an environment variable named directly is used.
type EnvUse struct {
	// Label names what the variable holds, in messages: "database's DSN".
	Label string
	// Secret marks the variable's value as a secret, masked whole.
	Secret bool
	// Required makes a program refuse to serve the file while the variable is unset.
	Required bool
}

// Duration is a length of time written in onceflow's one duration syntax, the same as
// the command's flags: "250ms", "30s", "30m", "36h", "1h30m", "90d", "2w", "1d12h".
type Duration time.Duration

// UnmarshalYAML parses a duration; an error is a *ValueError at the value.
func (d *Duration) UnmarshalYAML(n ast.Node) error {
	var s string
	if sc, ok := n.(ast.ScalarNode); ok {
		s = fmt.Sprint(sc.GetValue())
	} else {
		s = n.String()
	}
	v, err := duration.Parse(s)
	if err != nil {
		return ValueAt(n, "%v", err)
	}
	*d = Duration(v)
	return nil
}

// ValueError is a value's own decoding error, at the value's position: what a type's
// UnmarshalYAML returns so that the reader places the problem.
type ValueError struct {
	Line, Column int
	Message      string
}

func (e *ValueError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message) }

// ValueAt returns a *ValueError at node.
func ValueAt(node ast.Node, format string, args ...any) *ValueError {
	e := &ValueError{Message: fmt.Sprintf(format, args...)}
	if node != nil {
		if tk := node.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
	}
	return e
}

// Join joins a block path and a path relative to it.
func Join(base, rel string) string {
	switch {
	case rel == "":
		return base
	case strings.HasPrefix(rel, "["):
		return base + rel
	}
	return base + "." + rel
}
