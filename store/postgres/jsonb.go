package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// jsonbText returns the JSON text b as PostgreSQL's jsonb type prints it: an object's keys
// ordered by length, then byte by byte, ", " between elements and ": " after keys, and
// strings escaped only where JSON requires it (quotes, backslashes, control characters),
// so that a derived event's detail is byte for byte the detail of the event stored. Text
// that is not JSON is returned as it is.
func jsonbText(b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return b
	}
	var out bytes.Buffer
	if err := writeJSONB(&out, v); err != nil {
		return b
	}
	return out.Bytes()
}

func writeJSONB(out *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		out.WriteString("null")
	case bool:
		if x {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case json.Number:
		// numeric's text; the details derived hold integers only.
		out.WriteString(string(x))
	case string:
		writeJSONBString(out, x)
	case []any:
		out.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				out.WriteString(", ")
			}
			if err := writeJSONB(out, e); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if len(a) != len(b) {
				return len(a) - len(b)
			}
			return strings.Compare(a, b)
		})
		out.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				out.WriteString(", ")
			}
			writeJSONBString(out, k)
			out.WriteString(": ")
			if err := writeJSONB(out, x[k]); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	default:
		return fmt.Errorf("jsonb: %T", v)
	}
	return nil
}

// writeJSONBString writes s quoted as PostgreSQL's escape_json does.
func writeJSONBString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			out.WriteRune(r)
			i += n
			continue
		}
		switch c {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(out, `\u%04x`, c)
			} else {
				out.WriteByte(c)
			}
		}
		i++
	}
	out.WriteByte('"')
}
