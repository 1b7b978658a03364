package jsondoc

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tc := range []struct {
		name, doc string
		want      Kind // 0: accepted
		detail    string
	}{
		{"object", `{"id":"1","tags":["a","b"],"n":{"x":null}}`, 0, ""},
		{"scalar", `"text"`, 0, ""},
		{"same name in two objects", `{"a":{"id":1},"b":{"id":2}}`, 0, ""},
		{"at the limit", deep(8), 0, ""},
		{"surrogate pair", `{"s":"\ud83d\ude00"}`, 0, ""},
		{"invalid UTF-8", "{\"s\":\"a\xffb\"}", InvalidUTF8, "the message is not valid UTF-8"},
		{"lone surrogate", `{"s":"\ud800"}`, LoneSurrogate, "half of a UTF-16 surrogate pair"},
		{"escaped backslash before u", `{"s":"\\ud800"}`, 0, ""},
		{"duplicate member", `{"id":1,"x":{},"id":2}`, DuplicateMember, `the member "id" appears twice`},
		{"too deep", deep(9), TooDeep, "the message nests objects and lists more than 8 levels deep; the limit is 8"},
		{"deep list", strings.Repeat("[", 9) + strings.Repeat("]", 9), TooDeep, "more than 8 levels"},
		{"empty", " ", Malformed, "the message is empty"},
		{"two values", `{} {}`, Malformed, "must hold one JSON value"},
		{"cut short", `{"a":[1,2`, Malformed, "is not valid JSON"},
		{"not JSON", `order=1`, Malformed, "is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.doc), 8, "the message")
			if tc.want == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var de *Error
			if !errors.As(err, &de) || de.Kind != tc.want || !strings.Contains(de.Detail, tc.detail) {
				t.Fatalf("got %#v, want kind %d with %q", err, tc.want, tc.detail)
			}
		})
	}
	if err := Check([]byte(deep(DefaultMaxDepth+1)), 0, "the body"); err == nil {
		t.Errorf("a limit of 0 is not the default %d", DefaultMaxDepth)
	}
}

func TestDepth(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want int
	}{
		{`1`, 0},
		{`"{[{["`, 0},
		{`{"a":1}`, 1},
		{`{"a":[1,{"b":"x\"{"}]}`, 3},
		{`[[],[[]]]`, 3},
		{`{"id":"deep","x":` + strings.Repeat(`{"a":`, 9999) + `1` + strings.Repeat(`}`, 9999) + `}`, 10000},
	} {
		if got := Depth([]byte(tc.doc)); got != tc.want {
			t.Errorf("Depth(%.40q) = %d, want %d", tc.doc, got, tc.want)
		}
	}
}
