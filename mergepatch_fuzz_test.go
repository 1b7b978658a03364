package onceflow

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/onceflow/onceflow/internal/keytmpl"
)

// hasNullMember reports whether v holds an object member whose value is null (which a
// merge patch cannot express: it reads as a removal).
func hasNullMember(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for _, m := range t {
			if m == nil || hasNullMember(m) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasNullMember(e) {
				return true
			}
		}
	}
	return false
}

// FuzzMergePatch checks the RFC 7386 merge patch used by correct-and-replay on any two
// JSON documents: applying never panics and leaves its inputs unchanged, a patch applied
// twice changes nothing more, its null members are removed from the result, and the patch
// computed between two documents turns the first into the second.
func FuzzMergePatch(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a":"b"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`},
		{`{"a":["b"]}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`},
		{`{"a":"foo"}`, `null`},
		{`{"a":"foo"}`, `"bar"`},
		{`{"e":null}`, `{"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`},
		{`{"n":1.50,"big":123456789012345678901234567890}`, `{"n":2e3}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, rawTarget, rawPatch []byte) {
		if !json.Valid(rawTarget) || !json.Valid(rawPatch) {
			return
		}
		target, err1 := keytmpl.Decode(rawTarget)
		patch, err2 := keytmpl.Decode(rawPatch)
		if err1 != nil || err2 != nil {
			return
		}
		before, _ := json.Marshal(target)
		beforePatch, _ := json.Marshal(patch)

		once := applyMergePatch(target, patch)
		if got, _ := json.Marshal(target); string(got) != string(before) {
			t.Fatalf("applying changed the target: %s, was %s", got, before)
		}
		if got, _ := json.Marshal(patch); string(got) != string(beforePatch) {
			t.Fatalf("applying changed the patch: %s, was %s", got, beforePatch)
		}
		if _, err := encodeTree(once); err != nil {
			t.Fatalf("the result cannot be encoded: %v", err)
		}
		if twice := applyMergePatch(once, patch); !reflect.DeepEqual(twice, once) {
			t.Fatalf("a patch applied twice: %v, once: %v", twice, once)
		}
		if p, ok := patch.(map[string]any); ok {
			res := once.(map[string]any)
			for k, v := range p {
				if _, present := res[k]; v == nil && present {
					t.Fatalf("member %q is null in the patch but present in the result %v", k, res)
				}
			}
		} else if !reflect.DeepEqual(once, patch) {
			t.Fatalf("a patch that is not an object must replace the target: got %v, want %v", once, patch)
		}
		// The patch between the target and another document turns the one into the other.
		if hasNullMember(patch) {
			return
		}
		diff := createMergePatch(target, patch)
		if got := applyMergePatch(target, diff); !reflect.DeepEqual(got, patch) {
			t.Fatalf("createMergePatch(%s, %s) = %v, which applied gives %v", before, beforePatch, diff, got)
		}
	})
}
