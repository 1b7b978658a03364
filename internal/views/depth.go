package views

import "encoding/json"

// MaxIndentDepth is how deeply a JSON document may nest objects and lists and still be
// indented for reading (by the console and the command's --json output). Indenting costs
// the depth of each line in spaces, so a document of 60 KB nested 10,000 levels deep — a
// destination's answer, a queue message — would print as hundreds of megabytes; deeper
// documents are shown as they are stored.
const MaxIndentDepth = 64

// Depth returns how deeply the JSON document raw nests objects and lists: 0 for a scalar,
// 1 for {"a":1}. It reads raw once and does not validate it.
func Depth(raw []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

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
