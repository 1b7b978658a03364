package onceflow

import (
	"encoding/json"
	"reflect"
)

// applyMergePatch applies an RFC 7386 JSON merge patch to target (trees as decoded by
// keytmpl.Decode) and returns the result: an object patch merges member by member, null
// removing a member; anything else replaces the target.
func applyMergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	out := make(map[string]any, len(t)+len(p))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = applyMergePatch(out[k], v)
	}
	return out
}

// createMergePatch returns the merge patch that turns a into b: members of a missing
// from b become null, changed members are given (objects recursively). A null member of b
// cannot be expressed in a merge patch; it reads as a removal.
func createMergePatch(a, b any) any {
	ao, aok := a.(map[string]any)
	bo, bok := b.(map[string]any)
	if !aok || !bok {
		return b
	}
	patch := map[string]any{}
	for k := range ao {
		if _, ok := bo[k]; !ok {
			patch[k] = nil
		}
	}
	for k, bv := range bo {
		av, ok := ao[k]
		switch {
		case !ok:
			patch[k] = bv
		case !reflect.DeepEqual(av, bv):
			patch[k] = createMergePatch(av, bv)
		}
	}
	return patch
}

// encodeTree encodes a tree decoded by keytmpl.Decode back to JSON (numbers as written,
// object members sorted).
func encodeTree(v any) (json.RawMessage, error) {
	return json.Marshal(v)
}
