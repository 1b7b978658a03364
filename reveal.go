package onceflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/store"
)

// EventDataRevealed is the audit event of a person revealing one masked value of a run on
// purpose (Client.Reveal): who, which run, which field and why — never the value.
const EventDataRevealed = "data.revealed"

// RevealRequest asks for the clear value of one field of a run that its reads mask.
type RevealRequest struct {
	RunID int64
	// Field is the path of the value, names and list positions separated by dots:
	// input.customer.email, steps.crm.output.contact.phone, or a correction's value before
	// or after it, revisions.2.before.email and revisions.2.after.email.
	Field string
	// Reason says why the person needs the value (required); it is in the audit event.
	Reason string
	// Actor names the person (user:ana, token:ops); required.
	Actor string
}

// Revealed is a value Reveal showed.
type Revealed struct {
	Field string
	// Value is the field's value as stored, a JSON document, with the client's secrets
	// still masked.
	Value json.RawMessage
}

// ErrNotRevealable: the field a reveal asks for is a secret, which is never shown.
var ErrNotRevealable = errors.New("onceflow: secrets are never revealed")

// Reveal returns the clear value of one field of run r.RunID that the client's reads mask
// (personal data), for a person who needs it, after appending a data.revealed audit event
// naming r.Actor, the run, the field and r.Reason — never the value. Nothing is answered
// when the event cannot be stored. The client's secrets stay masked in the value, and a
// field whose name says it is a secret (password, token, authorization, …) is refused with
// ErrNotRevealable. An unknown run is an error matching ErrNotFound; a field the run does
// not hold is an error that says so.
func (c *Client) Reveal(ctx context.Context, r RevealRequest) (*Revealed, error) {
	r.Field, r.Reason = strings.TrimSpace(r.Field), strings.TrimSpace(r.Reason)
	switch {
	case r.Actor == "":
		return nil, errors.New("onceflow: reveal: the actor is required, for the audit trail")
	case r.Reason == "":
		return nil, errors.New("onceflow: reveal: say why the value is needed (the reason is required, for the audit trail)")
	case len(r.Reason) > 1000:
		return nil, errors.New("onceflow: reveal: the reason is longer than 1000 bytes")
	case r.Field == "" || len(r.Field) > 500:
		return nil, errors.New("onceflow: reveal: name the field, such as input.email or steps.crm.output.phone")
	}
	path := strings.Split(r.Field, ".")
	for _, name := range path {
		if name == "" {
			return nil, fmt.Errorf("onceflow: reveal: %q is not a field path: names separated by single dots", r.Field)
		}
		if secretName(name) {
			return nil, fmt.Errorf("reveal %s: %w: its name says it holds one", r.Field, ErrNotRevealable)
		}
	}
	run, err := c.store.RunGetByID(ctx, r.RunID)
	if err != nil {
		return nil, fmt.Errorf("onceflow: run %d: %w", r.RunID, err)
	}
	doc, rest, err := c.revealSource(ctx, run, path)
	if err != nil {
		return nil, fmt.Errorf("onceflow: reveal %s of run %d: %w", r.Field, r.RunID, err)
	}
	v, err := valueAt(doc, rest)
	if err != nil {
		return nil, fmt.Errorf("onceflow: reveal %s of run %d: %w", r.Field, r.RunID, err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("onceflow: reveal %s: %w", r.Field, err)
	}
	if err := c.appendOperatorEvent(ctx, OperatorEvent{Type: EventDataRevealed, Actor: r.Actor, RunID: run.ID, Workflow: run.Workflow,
		Reason: "revealed", Detail: map[string]any{"field": r.Field, "reason": r.Reason}}); err != nil {
		return nil, fmt.Errorf("onceflow: reveal %s of run %d: the audit event could not be stored, so nothing is shown: %w", r.Field, r.RunID, err)
	}
	return &Revealed{Field: r.Field, Value: c.redact.Secrets().JSON(raw)}, nil
}

// Revealable reports whether Reveal may show the field at path: not when a name in it says
// it holds a secret.
func Revealable(path string) bool {
	return !slices.ContainsFunc(strings.Split(path, "."), secretName)
}

// secretName reports whether a field named name is a secret by its name.
func secretName(name string) bool {
	n := strings.ToLower(name)
	return slices.ContainsFunc(redact.DefaultNames, func(f string) bool { return strings.Contains(n, f) })
}

// revealSource returns the stored document the path's first names select and the path
// within it.
func (c *Client) revealSource(ctx context.Context, run *store.Run, path []string) ([]byte, []string, error) {
	switch {
	case path[0] == "input":
		return run.Input, path[1:], nil
	case path[0] == "steps" && len(path) >= 3 && path[2] == "output":
		steps, err := c.store.StepListByRun(ctx, run.ID)
		if err != nil {
			return nil, nil, err
		}
		for _, st := range steps {
			if st.Name == path[1] {
				if len(st.Output) == 0 {
					return nil, nil, fmt.Errorf("step %s has no output", st.Name)
				}
				return st.Output, path[3:], nil
			}
		}
		return nil, nil, fmt.Errorf("the run has no step %s", path[1])
	case path[0] == "revisions" && len(path) >= 3 && (path[2] == "before" || path[2] == "after"):
		n, err := strconv.Atoi(path[1])
		if err != nil {
			return nil, nil, fmt.Errorf("%q is not a revision number", path[1])
		}
		revs, err := c.store.RunRevisionList(ctx, run.ID)
		if err != nil {
			return nil, nil, err
		}
		for _, rv := range revs {
			if rv.Revision == n {
				if path[2] == "before" {
					return rv.InputBefore, path[3:], nil
				}
				return rv.InputAfter, path[3:], nil
			}
		}
		return nil, nil, fmt.Errorf("the run has no revision %d", n)
	}
	return nil, nil, errors.New("a field path starts with input, steps.STEP.output or revisions.N.before (or after)")
}

// valueAt returns the value of the document raw at path: object names, and list positions
// from 0.
func valueAt(raw []byte, path []string) (any, error) {
	v, err := keytmpl.Decode(raw)
	if err != nil {
		return nil, err
	}
	for i, name := range path {
		switch t := v.(type) {
		case map[string]any:
			x, ok := t[name]
			if !ok {
				return nil, fmt.Errorf("there is no field %s", strings.Join(path[:i+1], "."))
			}
			v = x
		case []any:
			n, err := strconv.Atoi(name)
			if err != nil || n < 0 || n >= len(t) {
				return nil, fmt.Errorf("%s is a list of %d; %q is not a position in it", strings.Join(path[:i], "."), len(t), name)
			}
			v = t[n]
		default:
			return nil, fmt.Errorf("there is no field %s", strings.Join(path[:i+1], "."))
		}
	}
	return v, nil
}

// changedFields lists the paths (dot-joined object names) of the values that differ
// between two JSON documents, sorted: what a correction changed, masked or not.
func changedFields(before, after []byte) []string {
	a, _ := keytmpl.Decode(before)
	b, _ := keytmpl.Decode(after)
	fa, fb := map[string]string{}, map[string]string{}
	leaves("", a, fa)
	leaves("", b, fb)
	var out []string
	for p, v := range fa {
		if w, ok := fb[p]; !ok || w != v {
			out = append(out, p)
		}
	}
	for p := range fb {
		if _, ok := fa[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// leaves collects the values of a decoded document by path, lists whole.
func leaves(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok && (len(m) > 0 || prefix == "") {
		for k, x := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			leaves(p, x, out)
		}
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	out[prefix] = buf.String()
}
