package triggers

import (
	"errors"
	"fmt"
	"regexp"
	"sync"
)

// Registry is the trigger kinds a program knows, in the order they were added. Build one
// with NewRegistry and Add (stdtriggers.New returns one holding the standard kinds), then
// hand it to the reader of workflow files; nothing registers itself.
type Registry struct {
	mu      sync.Mutex
	kinds   []Kind
	byBlock map[string]Kind
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byBlock: map[string]Kind{}} }

var blockRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// FileFields are the fields every workflow file has; no trigger's block may take one of
// their names.
var FileFields = []string{"name", "description", "run_key", "entity", "input", "steps", "redact", "secrets", "notify", "limits", "api"}

// Add registers k. It refuses a block that is not 1-40 lowercase letters, digits and '_',
// one another kind has, and one named like a field every file has.
func (r *Registry) Add(k Kind) error {
	if k == nil {
		return errors.New("triggers: Add(nil)")
	}
	spec := k.Spec()
	if !blockRE.MatchString(spec.Block) {
		return fmt.Errorf("triggers: block %q must be 1-40 lowercase letters, digits and '_', starting with a letter", spec.Block)
	}
	for _, f := range FileFields {
		if spec.Block == f {
			return fmt.Errorf("triggers: block %q is a field every workflow file has", spec.Block)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byBlock[spec.Block]; ok {
		return fmt.Errorf("triggers: a kind with block %q is registered already", spec.Block)
	}
	r.kinds = append(r.kinds, k)
	r.byBlock[spec.Block] = k
	return nil
}

// ByBlock returns the kind whose settings go in the top-level field field.
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
