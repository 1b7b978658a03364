package jsondoc

import "encoding/json"

// MaxIndentDepth is how deeply a JSON document may nest objects and lists and still be
// indented for reading (by the console and the command's --json output). Indenting costs
// the depth of each line in spaces, so a document of 60 KB nested 10,000 levels deep — a
// destination's answer, a queue message — would print as hundreds of megabytes; deeper
// documents are shown as they are stored.
const MaxIndentDepth = 64

// Shallow returns raw when it nests at most MaxIndentDepth levels, and otherwise raw as
// one JSON string: a document that --json output can indent at the cost of its size.
func Shallow(raw json.RawMessage) json.RawMessage {
	if Depth(raw) <= MaxIndentDepth {
		return raw
	}
	s, err := json.Marshal(string(raw))
	if err != nil {
		return raw
	}
	return s
}
