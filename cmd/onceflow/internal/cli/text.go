package cli

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/onceflow/onceflow/internal/safetext"
)

// Human-readable output. Every command prints what people read through outf, outln and
// out: they escape each string argument with safetext.Escape, so that a stored key,
// entity, error or input that holds terminal escapes, a newline, a tab or a bidi override —
// rows written before the identifier rules, or text from a destination — can neither act
// on the terminal, nor forge a line, nor shift a table's columns. The format itself is the
// command's own and is written as it is. --json output is JSON and escaped as JSON is.

// outf is fmt.Fprintf with every string argument escaped.
func outf(w io.Writer, format string, args ...any) {
	escapeArgs(args)
	fmt.Fprintf(w, format, args...)
}

// outln is fmt.Fprintln with every argument escaped: for text, not table rows (a tab in
// an argument is escaped too; write rows with outf).
func outln(w io.Writer, args ...any) {
	escapeArgs(args)
	fmt.Fprintln(w, args...)
}

// out is fmt.Fprint with every argument escaped.
func out(w io.Writer, args ...any) {
	escapeArgs(args)
	fmt.Fprint(w, args...)
}

// multiline is text whose line breaks are its own (an error that joins several): each
// line is escaped, the breaks are kept.
type multiline string

// escapeArgs replaces each string-like argument (a string or a type defined on one, a
// []byte, an error) with its escaped text.
func escapeArgs(args []any) {
	for i, a := range args {
		switch v := a.(type) {
		case multiline:
			lines := strings.Split(string(v), "\n")
			for j, l := range lines {
				lines[j] = safetext.Escape(l)
			}
			args[i] = strings.Join(lines, "\n")
		case string:
			args[i] = safetext.Escape(v)
		case []byte:
			args[i] = safetext.Escape(string(v))
		case error:
			args[i] = safetext.Escape(v.Error())
		default:
			if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
				args[i] = safetext.Escape(rv.String())
			}
		}
	}
}
