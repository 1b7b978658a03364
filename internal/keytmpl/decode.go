package keytmpl

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Decode parses JSON into the tree Render reads, keeping numbers exact: every number is a
// json.Number holding the text it was written with, so that an id above 2^53 is never
// turned into its float64 neighbour. It is the one decoder of JSON from outside — run
// inputs, step outputs, fan-out list pages, webhook payloads, queue messages — read by
// templates, conditions and the step kinds. Empty input is nil; anything after the one
// value but white space is an error.
func Decode(raw []byte) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := DecodeInto(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// DecodeInto decodes one JSON value into v as Decode does: numbers that land in an any
// (a map[string]any's values, an []any's elements) are json.Numbers.
func DecodeInto(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON: more after the first value")
	}
	return nil
}

// maxExactExponent bounds the decimal exponent NumberValue works out exactly: beyond it a
// number is no float64 but 0 or infinity, and computing 10^exponent would cost memory in
// proportion.
const maxExactExponent = 400

// NumberValue returns the Go number n stands for, without rounding: an int64 for an
// integer within int64's range whatever its notation (12, 12.0, 1.2e1), a float64 for any
// other number that float64 holds as written — its shortest decimal is the same number
// (19.99, 0.1, 2.5e-3) — and ok false for the rest: integers beyond int64, and numbers
// with more digits than float64 keeps (9007199254740993.5). Those can only be compared as
// text; turning them into a float64 would silently change them.
func NumberValue(n json.Number) (v any, ok bool) {
	s := n.String()
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, true
	}
	r, ok := exactRat(s)
	if !ok {
		return nil, false
	}
	if r.IsInt() {
		if r.Num().IsInt64() {
			return r.Num().Int64(), true
		}
		return nil, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, false
	}
	short, ok := exactRat(strconv.FormatFloat(f, 'g', -1, 64))
	if !ok || short.Cmp(r) != 0 {
		return nil, false
	}
	return f, true
}

// exactRat returns the exact value of a JSON number's text, unless its exponent is so
// large or small that no float64 or int64 is near it.
func exactRat(s string) (*big.Rat, bool) {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > maxExactExponent || e < -maxExactExponent-len(s) {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}
