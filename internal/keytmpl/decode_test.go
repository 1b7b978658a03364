package keytmpl

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeKeepsNumbersAndRefusesTrailingData(t *testing.T) {
	v, err := Decode([]byte(` {"id": 9007199254740993, "wide": 18446744073709551617, "f": 19.90} `))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["id"] != json.Number("9007199254740993") || m["wide"] != json.Number("18446744073709551617") || m["f"] != json.Number("19.90") {
		t.Errorf("decoded %#v", m)
	}
	for _, bad := range []string{`{"a": 1} {"b": 2}`, `1 2`, `{"a": 1}x`, `{"a": 1`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q): no error", bad)
		}
	}
	var into struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := DecodeInto([]byte(`{"rows": [{"id": 9007199254740993}]}`), &into); err != nil || into.Rows[0]["id"] != json.Number("9007199254740993") {
		t.Errorf("DecodeInto: %#v, %v", into, err)
	}
}

func TestNumberValue(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want any // nil: not exact
	}{
		{"12", int64(12)},
		{"-12", int64(-12)},
		{"12.0", int64(12)},
		{"1.2e1", int64(12)},
		{"9007199254740993", int64(9007199254740993)},
		{"9007199254740993.0", int64(9007199254740993)},
		{"9.007199254740993e15", int64(9007199254740993)},
		{"9223372036854775807", int64(9223372036854775807)},
		{"9223372036854775808", nil},
		{"18446744073709551617", nil},
		{"-9223372036854775809", nil},
		{"19.99", 19.99},
		{"0.1", 0.1},
		{"2.5e-3", 0.0025},
		{"9007199254740993.5", nil},
		{"0.1000000000000000000000000001", nil},
		{"1e400", nil},
		{"1e-400", nil},
		{"1e1000000000", nil},
		{"1e-1000000000", nil},
		{"0.5", 0.5},
		{"-0", int64(0)},
	} {
		got, ok := NumberValue(json.Number(tt.in))
		if tt.want == nil {
			if ok {
				t.Errorf("NumberValue(%s) = %v (%T), want not exact", tt.in, got, got)
			}
			continue
		}
		if !ok || got != tt.want {
			t.Errorf("NumberValue(%s) = %v (%T), %v; want %v (%T)", tt.in, got, got, ok, tt.want, tt.want)
		}
	}
	if v, ok := NumberValue(json.Number("1" + strings.Repeat("0", 100) + "e-399")); !ok || v != 1e-299 {
		t.Errorf("1e-299 written with 100 zeros: %v, %v", v, ok)
	}
}
