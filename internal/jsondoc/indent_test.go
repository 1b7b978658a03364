package jsondoc

import (
	"encoding/json"
	"strings"
	"testing"
)

func nestedDoc(depth int) string {
	return `{"id":"deep","x":` + strings.Repeat(`{"a":`, depth-1) + `1` + strings.Repeat(`}`, depth-1) + `}`
}

// A document nested too deeply to indent becomes one string holding it, unchanged.
func TestShallow(t *testing.T) {
	ok := json.RawMessage(nestedDoc(MaxIndentDepth))
	if got := Shallow(ok); string(got) != string(ok) {
		t.Fatalf("Shallow changed a document of depth %d", MaxIndentDepth)
	}
	deep := nestedDoc(10000)
	got := Shallow(json.RawMessage(deep))
	var s string
	if err := json.Unmarshal(got, &s); err != nil || s != deep {
		t.Fatalf("Shallow of a deep document: %.80s (%v)", got, err)
	}
}
