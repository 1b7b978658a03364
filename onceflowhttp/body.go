package onceflowhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// DefaultMaxDepth is how deeply a request body's JSON may nest when Config.MaxDepth is
// zero: objects and lists inside each other, the outermost counting 1.
const DefaultMaxDepth = 64

// AbortMetrics is implemented by a Config.Metrics that also counts requests whose body
// was cut short (the client announced more than it sent, stalled, or went away).
type AbortMetrics interface {
	// RequestAborted counts one such request on route, the pattern that served it.
	RequestAborted(route string)
}

// errBodyIncomplete marks a body the client did not finish sending.
var errBodyIncomplete = errors.New("request body incomplete")

// readBody reads at most MaxBody bytes; a larger body is a 413 before anything is parsed.
// A body cut short is a 400 "body-incomplete", logged at debug level and counted: it is
// the client's doing, not the server's.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err == nil {
		return body, nil
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, err
	}
	s.log.Debug("request body incomplete", "method", r.Method, "route", r.Pattern, "error", err)
	if am, ok := s.cfg.Metrics.(AbortMetrics); ok {
		am.RequestAborted(r.Pattern)
	}
	p := newProblem(http.StatusBadRequest, "body-incomplete", "Request body incomplete",
		"the body ended before the length the request announced, or the client stopped sending; nothing was accepted")
	return nil, p
}

// checkJSON refuses a body that two JSON parsers could read differently, or that costs far
// more to handle than its size: invalid UTF-8, an object with the same member twice, and
// nesting deeper than maxDepth. It also refuses anything that is not one JSON value.
func checkJSON(body []byte, maxDepth int) error {
	if !utf8.Valid(body) {
		return newProblem(http.StatusBadRequest, "invalid-utf8", "Invalid UTF-8",
			"the body is not valid UTF-8; JSON text must be UTF-8 encoded")
	}
	if loneSurrogate(body) {
		return newProblem(http.StatusBadRequest, "invalid-utf8", "Invalid UTF-16 escape",
			"the body escapes half of a UTF-16 surrogate pair (such as \\ud800 alone); it stands for no character")
	}
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // an object expects a member name next
	}
	malformed := func(detail string) error {
		return newProblem(http.StatusBadRequest, "malformed-json", "Malformed JSON", detail)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*frame
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return malformed("the request body is not valid JSON: " + err.Error())
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
				return newProblem(http.StatusBadRequest, "duplicate-member", "Duplicate JSON member",
					fmt.Sprintf("the member %q appears twice in one object; parsers disagree about which one counts, so send it once", name))
			}
			top.keys[name] = true
			top.key = false
			continue
		}
		if top == nil {
			values++
			if values > 1 {
				return malformed("the body must hold one JSON value")
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if top != nil && top.object {
				top.key = true
			}
			if len(stack) >= maxDepth {
				return newProblem(http.StatusBadRequest, "json-too-deep", "JSON nested too deeply",
					fmt.Sprintf("the body nests objects and lists more than %d levels deep; the limit is %d", maxDepth, maxDepth))
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
		return malformed("the request body is empty; send a JSON value")
	}
	if len(stack) > 0 || !json.Valid(body) {
		return malformed("the request body is not valid JSON: it ends before its last value does")
	}
	return nil
}

// checkBody applies checkJSON with the server's depth limit.
func (s *Server) checkBody(body []byte) error { return checkJSON(body, s.cfg.MaxDepth) }

// loneSurrogate reports whether body has a \uD800-\uDFFF escape that is not half of a
// high-low pair: decoders replace it with U+FFFD, so two different bodies would read the
// same.
func loneSurrogate(body []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range body[i+2 : i+6] {
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
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
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
