package duration

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"90d", 90 * Day},
		{"2w", 2 * Week},
		{"36h", 36 * time.Hour},
		{"30m", 30 * time.Minute},
		{"45s", 45 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"1.5s", 1500 * time.Millisecond},
		{"1h30m", 90 * time.Minute},
		{"1d12h", 36 * time.Hour},
		{"1w2d", 9 * Day},
		{" 7d ", 7 * Day},
		{"0", 0},
		{"0s", 0},
		{"0d", 0},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseErrorsSayHowToWriteOne(t *testing.T) {
	for _, tc := range []struct{ in, problem string }{
		{"", "it is empty"},
		{"30", "it has no unit"},
		{"-5m", "it is negative"},
		{"1.5d", "whole number of days"},
		{"3y", "the unit is unknown"},
		{"soon", "it cannot be read"},
		{"d", "it cannot be read"},
		{"999999999999w", "too long"},
	} {
		_, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q) accepted it", tc.in)
			continue
		}
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.problem) || !strings.Contains(err.Error(), "such as 90d, 2w, 36h, 30m") {
			t.Errorf("Parse(%q) error = %q; want one naming %q and the syntax", tc.in, err, tc.problem)
		}
	}
	if _, err := ParsePositive("0d"); err == nil || !strings.Contains(err.Error(), "longer than zero") {
		t.Errorf("ParsePositive(0d) = %v", err)
	}
}

func TestFormatRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{90 * Day, "90d"},
		{36 * time.Hour, "1d12h"},
		{30 * time.Minute, "30m"},
		{90 * time.Minute, "1h30m"},
		{5 * time.Hour, "5h"},
		{250 * time.Millisecond, "250ms"},
		{1500 * time.Millisecond, "1.5s"},
		{0, "0s"},
	} {
		got := Format(tc.in)
		if got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.in, got, tc.want)
		}
		if back, err := Parse(got); err != nil || back != tc.in {
			t.Errorf("Parse(Format(%v)) = %v, %v", tc.in, back, err)
		}
	}
}

func TestFlag(t *testing.T) {
	var d time.Duration
	f := NewFlag(&d, 30*time.Second)
	if f.String() != "30s" || f.Type() != "duration" {
		t.Fatalf("default %q type %q", f.String(), f.Type())
	}
	if err := f.Set("90d"); err != nil || d != 90*Day {
		t.Fatalf("Set(90d): %v, %v", d, err)
	}
	f.Positive = true
	if err := f.Set("0s"); err == nil {
		t.Fatal("a positive flag took 0s")
	}
	if err := f.Set("ten minutes"); err == nil || !strings.Contains(err.Error(), `"ten minutes" is not a duration`) {
		t.Fatalf("Set(ten minutes) = %v", err)
	}
}
