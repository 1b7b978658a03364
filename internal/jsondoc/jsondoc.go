// Package jsondoc checks a JSON document that arrives from outside — an API request's body,
// a webhook delivery, a queue message — before onceflow keeps it. It refuses what two JSON
// parsers could read differently, or what costs far more to handle than its size: invalid
// UTF-8, an escaped half of a UTF-16 surrogate pair, an object with the same member twice,
// nesting deeper than a limit, and anything that is not exactly one JSON value. Each
// refusal says, in words meant for the sender, what is wrong.
package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// DefaultMaxDepth is how deeply a document may nest objects and lists by default, the
// outermost counting 1.
const DefaultMaxDepth = 64

// Kind says why a document was refused.
type Kind int

// The reasons a document is refused.
const (
	// InvalidUTF8: the text is not UTF-8.
	InvalidUTF8 Kind = iota + 1
	// LoneSurrogate: an escape such as \ud800 stands for no character.
	LoneSurrogate
	// Malformed: not JSON, empty, or more than one value.
	Malformed
	// DuplicateMember: an object names a member twice.
	DuplicateMember
	// TooDeep: objects and lists nest deeper than the limit.
	TooDeep
)

// Error is a refused document: its Kind, and Detail, which says what to fix.
type Error struct {
	Kind   Kind
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// Check refuses doc unless it is one JSON value in valid UTF-8, with no member twice in an
// object and no deeper nesting than maxDepth (DefaultMaxDepth when maxDepth <= 0). what
// names the document in the refusal's Detail ("the body", "the message"). The error is
// an *Error.
func Check(doc []byte, maxDepth int, what string) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if !utf8.Valid(doc) {
		return &Error{InvalidUTF8, what + " is not valid UTF-8; JSON text must be UTF-8 encoded"}
	}
	if loneSurrogate(doc) {
		return &Error{LoneSurrogate, what + " escapes half of a UTF-16 surrogate pair (such as \\ud800 alone); it stands for no character"}
	}
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // an object expects a member name next
	}
	malformed := func(detail string) error { return &Error{Malformed, detail} }
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var stack []*frame
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return malformed(what + " is not valid JSON: " + err.Error())
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			name, _ := tok.(string) // the decoder only yields a string or '}' here
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			if top.keys[name] {
				return &Error{DuplicateMember, fmt.Sprintf("the member %q appears twice in one object; parsers disagree about which one counts, so send it once", name)}
			}
			top.keys[name] = true
			top.key = false
			continue
		}
		if top == nil {
			values++
			if values > 1 {
				return malformed(what + " must hold one JSON value")
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if top != nil && top.object {
				top.key = true
			}
			if len(stack) >= maxDepth {
				return &Error{TooDeep, fmt.Sprintf("%s nests objects and lists more than %d levels deep; the limit is %d", what, maxDepth, maxDepth)}
			}
			f := &frame{object: tok == json.Delim('{')}
			if f.object {
				f.keys, f.key = map[string]bool{}, true
			}
			stack = append(stack, f)
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if top != nil && top.object {
				top.key = true
			}
		}
	}
	if values == 0 {
		return malformed(what + " is empty; send a JSON value")
	}
	if len(stack) > 0 || !json.Valid(doc) {
		return malformed(what + " is not valid JSON: it ends before its last value does")
	}
	return nil
}

// loneSurrogate reports whether doc has a \uD800-\uDFFF escape that is not half of a
// high-low pair: decoders replace it with U+FFFD, so two different documents would read
// the same.
func loneSurrogate(doc []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(doc) || doc[i] != '\\' || doc[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range doc[i+2 : i+6] {
			switch {
			case c >= '0' && c <= '9':
				r = r<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // another escape: skip the escaped character
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := hex4(i + 6)
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return true
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

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

// DepthProblem says that a document nests depth levels where limit are allowed, in the
// words Start's InputError and the queues' review items share.
func DepthProblem(depth, limit int) string {
	return fmt.Sprintf("nests objects and lists %d levels deep; the limit is %d", depth, limit)
}
