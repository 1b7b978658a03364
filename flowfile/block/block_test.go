package block_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flowfile/block"
)

type settings struct {
	URL     string         `yaml:"url"`
	Timeout block.Duration `yaml:"timeout"`
}

func TestSettingsDecodeStrictly(t *testing.T) {
	s, err := block.FromYAML("url: https://example.com\ntimeout: 2w\n")
	if err != nil {
		t.Fatal(err)
	}
	var v settings
	if err := s.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.URL != "https://example.com" || time.Duration(v.Timeout) != 14*24*time.Hour {
		t.Errorf("decoded %+v", v)
	}
	if !s.Has("url") || s.Has("body") || s.Path() != "$" || s.IsZero() {
		t.Errorf("Has(url) %v, Has(body) %v, Path %q, IsZero %v", s.Has("url"), s.Has("body"), s.Path(), s.IsZero())
	}

	s, _ = block.FromYAML("url: x\nverb: POST\n")
	if err := s.Decode(&v); err == nil || !strings.Contains(err.Error(), `unknown field "verb"`) {
		t.Errorf("an unknown field decoded: %v", err)
	}

	// A duration's own error is placed at its value.
	s, _ = block.FromYAML("url: x\ntimeout: soon\n")
	err = s.Decode(&v)
	var ve *block.ValueError
	if !errors.As(err, &ve) || ve.Line != 2 || ve.Column != 10 || !strings.Contains(ve.Message, `"soon" is not a duration`) {
		t.Errorf("timeout: soon: %v", err)
	}
	if (block.Settings{}).Decode(&v) != nil || !(block.Settings{}).IsZero() {
		t.Error("the zero Settings is not an absent block")
	}
}

func TestJoin(t *testing.T) {
	for _, c := range []struct{ base, rel, want string }{
		{"$.steps[0].http", "", "$.steps[0].http"},
		{"$.steps[0].http", "url", "$.steps[0].http.url"},
		{"$.steps[0].sql.statements", "[1]", "$.steps[0].sql.statements[1]"},
	} {
		if got := block.Join(c.base, c.rel); got != c.want {
			t.Errorf("Join(%q, %q) = %q, want %q", c.base, c.rel, got, c.want)
		}
	}
}
