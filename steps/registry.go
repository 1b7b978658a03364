package steps

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
)

// Registry is the step kinds a program knows, in the order they were added: the order of
// the kind lists in messages and of the kinds in the schema. Build one with NewRegistry
// and Add (stdsteps.New returns one holding the standard kinds), then hand it to the
// reader of workflow files; nothing registers itself.
type Registry struct {
	mu       sync.Mutex
	kinds    []Kind
	byName   map[string]Kind
	byBlock  map[string]Kind
	byAlert  map[string]Alerter
	alerters []Alerter
	closed   bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]Kind{}, byBlock: map[string]Kind{}, byAlert: map[string]Alerter{}}
}

var (
	nameRE  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	blockRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
)

// StepFields are the fields every step has; no kind's block may take one of their names.
var StepFields = []string{"id", "kind", "effect_key", "needs", "when", "retry", "on_exhausted", "on_unknown",
	"retention", "timeout", "delay", "not_before", "notify", "limits"}

// Add registers k. It refuses a Spec without a valid name, a name or block another kind
// has, a block named like a step field, and an Alerter whose notify field another has.
func (r *Registry) Add(k Kind) error {
	if k == nil {
		return errors.New("steps: Add(nil)")
	}
	spec := k.Spec()
	if !nameRE.MatchString(spec.Name) {
		return fmt.Errorf("steps: kind name %q must be 1-40 lowercase letters, digits and '-', starting with a letter", spec.Name)
	}
	blk := spec.BlockName()
	if !blockRE.MatchString(blk) {
		return fmt.Errorf("steps: kind %s: block %q must be 1-40 lowercase letters, digits and '_', starting with a letter", spec.Name, blk)
	}
	for _, f := range StepFields {
		if blk == f {
			return fmt.Errorf("steps: kind %s: block %q is a field every step has", spec.Name, blk)
		}
	}
	for name := range spec.Defs {
		if !strings.HasPrefix(name, spec.Name+".") {
			return fmt.Errorf("steps: kind %s: definition %q must be named %s.SOMETHING", spec.Name, name, spec.Name)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[spec.Name]; ok {
		return fmt.Errorf("steps: kind %s is registered already", spec.Name)
	}
	if other, ok := r.byBlock[blk]; ok {
		return fmt.Errorf("steps: kind %s: block %q is kind %s's", spec.Name, blk, other.Spec().Name)
	}
	a, isAlerter := k.(Alerter)
	if isAlerter {
		ab := a.AlertBlock()
		if !blockRE.MatchString(ab) {
			return fmt.Errorf("steps: kind %s: notify field %q must be 1-40 lowercase letters, digits and '_'", spec.Name, ab)
		}
		if ab == "off" || ab == "reasons" || ab == "window" {
			return fmt.Errorf("steps: kind %s: notify field %q is one every notify block has", spec.Name, ab)
		}
		if other, ok := r.byAlert[ab]; ok {
			return fmt.Errorf("steps: kind %s: notify field %q is kind %s's", spec.Name, ab, other.Spec().Name)
		}
	}
	r.kinds = append(r.kinds, k)
	r.byName[spec.Name], r.byBlock[blk] = k, k
	if isAlerter {
		r.byAlert[a.AlertBlock()] = a
		r.alerters = append(r.alerters, a)
	}
	return nil
}

// Lookup returns the kind named name.
func (r *Registry) Lookup(name string) (Kind, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.byName[name]
	return k, ok
}

// ByBlock returns the kind whose settings go in the step field field.
func (r *Registry) ByBlock(field string) (Kind, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.byBlock[field]
	return k, ok
}

// Kinds returns the kinds in the order they were added.
func (r *Registry) Kinds() []Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Kind(nil), r.kinds...)
}

// Alerters returns the kinds that carry notifications, in the order they were added.
func (r *Registry) Alerters() []Alerter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Alerter(nil), r.alerters...)
}

// Alerter returns the kind that carries notifications configured by a notify block's
// field.
func (r *Registry) Alerter(field string) (Alerter, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.byAlert[field]
	return a, ok
}

// Names lists the kinds' names as messages do: "http, email or go".
func (r *Registry) Names(conj string) string {
	var names []string
	for _, k := range r.Kinds() {
		names = append(names, k.Spec().Name)
	}
	return List(names, conj)
}

// List joins words as a sentence does: "a", "a or b", "a, b or c".
func List(words []string, conj string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}

// Close closes what the kinds' steps opened (each Kind that is an io.Closer), in reverse
// order, and joins their errors. Steps built from the kinds must not run afterwards;
// closing twice does nothing.
func (r *Registry) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	kinds := append([]Kind(nil), r.kinds...)
	r.mu.Unlock()
	var errs []error
	for i := len(kinds) - 1; i >= 0; i-- {
		if c, ok := kinds[i].(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close kind %s: %w", kinds[i].Spec().Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
