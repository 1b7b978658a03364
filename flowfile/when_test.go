package flowfile

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
)

// A when condition compares numbers exactly: integers are compared as integers whatever
// their notation (9007199254740993.0 is 9007199254740993, not its float64 neighbour), two
// integers beyond 64 bits are equal only when they are the same number, ordering such a
// number is an error (the step goes to review) rather than a guess, and a number literal
// that float64 cannot hold as written is refused when the file is loaded.
func TestWhenComparesNumbersExactly(t *testing.T) {
	for _, tt := range []struct {
		when, input string
		want        bool
		err         string // a part of the evaluation error; "" for none
	}{
		{`input.id == 9007199254740993`, `{"id": 9007199254740993}`, true, ""},
		{`input.id == 9007199254740993`, `{"id": 9007199254740992}`, false, ""},
		{`input.id == 9007199254740993`, `{"id": 9007199254740993.0}`, true, ""},
		{`input.id == 9007199254740992`, `{"id": 9007199254740993.0}`, false, ""},
		{`input.id == 9007199254740993`, `{"id": 9.007199254740993e15}`, true, ""},
		{`input.id == 9007199254740992`, `{"id": 9.007199254740993e15}`, false, ""},
		{`input.a == input.b`, `{"a": 18446744073709551617, "b": 18446744073709551616}`, false, ""},
		{`input.a == input.b`, `{"a": 18446744073709551617, "b": 18446744073709551617}`, true, ""},
		{`input.a != input.b`, `{"a": 18446744073709551617, "b": 18446744073709551616}`, true, ""},
		{`input.a == 9223372036854775807`, `{"a": 9223372036854775808}`, false, ""},
		{`input.a > 5`, `{"a": 18446744073709551617}`, false, "18446744073709551617"},
		{`input.amount == 19.99`, `{"amount": 19.99}`, true, ""},
		{`input.amount > 19.98 && input.amount < 20`, `{"amount": 19.99}`, true, ""},
		{`input.n * 2 == 10`, `{"n": 5}`, true, ""},
		{`input.x == 1e400`, `{"x": 1}`, false, ""}, // refused below: never evaluated
	} {
		prog, err := compileWhen(tt.when)
		if tt.when == `input.x == 1e400` {
			if err == nil {
				t.Errorf("when %q compiled; a literal float64 cannot hold must be refused", tt.when)
			}
			continue
		}
		if err != nil {
			t.Errorf("when %q: %v", tt.when, err)
			continue
		}
		got, err := whenFunc(prog)(&onceflow.StepContext{Input: json.RawMessage(tt.input)})
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("when %q on %s: %v, %v; want an error naming %s", tt.when, tt.input, got, err, tt.err)
			}
		case err != nil:
			t.Errorf("when %q on %s: %v", tt.when, tt.input, err)
		case got != tt.want:
			t.Errorf("when %q on %s: %v, want %v", tt.when, tt.input, got, tt.want)
		}
	}
}

// Number literals that float64 rounds are refused when the file loads, naming the number
// and the fix.
func TestWhenRefusesInexactLiterals(t *testing.T) {
	for _, src := range []string{
		`input.id == 9007199254740993.0`,
		`input.id == 9.007199254740993e15`,
		`input.amount == 0.1000000000000000000000000001`,
	} {
		_, err := compileWhen(src)
		if err == nil || !strings.Contains(err.Error(), "cannot be compared exactly") {
			t.Errorf("when %q: %v; want it refused as a number that cannot be compared exactly", src, err)
		}
	}
	for _, src := range []string{`input.amount == 19.99`, `input.n == 1e3`, `input.n == 0x10`, `input.n == 1_000`, `input.s == "9007199254740993.0"`} {
		if _, err := compileWhen(src); err != nil {
			t.Errorf("when %q: %v", src, err)
		}
	}
}
