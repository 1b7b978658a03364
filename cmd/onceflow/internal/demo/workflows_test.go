package demo

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/onceflow/onceflow/examples"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/httpstep"
)

// testReader reads files against the demo's kinds, with no database or environment.
func testReader(t *testing.T) *flowfile.Reader {
	t.Helper()
	kinds, err := demoKinds(nil, nil, newOwnListeners())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kinds.Close() })
	return reader(kinds)
}

func TestLoadWorkflowsShortensDelaysOnly(t *testing.T) {
	t.Parallel()
	defs, err := loadWorkflows(examples.FS, "examples", testReader(t))
	if err != nil {
		t.Fatal(err)
	}
	orig := map[string]flowfile.StepDef{}
	for _, d := range defs {
		for _, s := range d.Steps {
			orig[d.Name+"/"+s.ID] = s
		}
	}
	if len(defs) != 4 || orig["website-lead/crm_lead"].Kind != "http" || orig["payment-succeeded/mark_paid"].Kind != "transition" {
		t.Fatalf("loaded %d definitions: %v", len(defs), orig)
	}
	keys := map[string]string{}
	for k, s := range orig {
		keys[k] = s.EffectKey
	}
	shorten(defs, 40)
	got := map[string]flowfile.StepDef{}
	for _, d := range defs {
		for _, s := range d.Steps {
			got[d.Name+"/"+s.ID] = s
		}
	}
	tests := []struct {
		step             string
		attempts         int
		initial, max, to time.Duration // to: the http timeout, 0 for other kinds
	}{
		{"website-lead/crm_lead", 8, 50 * time.Millisecond, 7500 * time.Millisecond, 750 * time.Millisecond},
		{"website-lead/whatsapp_notice", 6, 125 * time.Millisecond, 15 * time.Second, 750 * time.Millisecond},
		{"website-lead/welcome_email", 0, 50 * time.Millisecond, 7500 * time.Millisecond, 0},
		{"payment-succeeded/create_invoice", 0, 50 * time.Millisecond, 7500 * time.Millisecond, 750 * time.Millisecond},
	}
	for _, tt := range tests {
		s := got[tt.step]
		if s.Retry == nil || s.Retry.MaxAttempts != tt.attempts || time.Duration(s.Retry.Initial) != tt.initial || time.Duration(s.Retry.Max) != tt.max {
			t.Errorf("%s: retry %+v; want %d attempts, %v initial, %v max", tt.step, s.Retry, tt.attempts, tt.initial, tt.max)
		}
		if h, ok := s.Config.(*httpstep.Settings); ok && time.Duration(h.Timeout) != tt.to {
			t.Errorf("%s: http timeout %v, want %v", tt.step, time.Duration(h.Timeout), tt.to)
		}
	}
	for k, s := range got {
		if s.EffectKey != keys[k] {
			t.Errorf("%s: effect key changed from %q to %q", k, keys[k], s.EffectKey)
		}
	}
}

func TestLoadWorkflowsReportsProblems(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"bad.yaml": {Data: []byte("name: x\nsteps:\n  - id: a\n    kind: ftp\n")}}
	_, err := loadWorkflows(fsys, "dir", testReader(t))
	var ps flowfile.Problems
	if !errors.As(err, &ps) || !strings.Contains(err.Error(), "dir/bad.yaml:4:") {
		t.Fatalf("err = %v; want a problem at dir/bad.yaml:4", err)
	}
	if _, err := loadWorkflows(fstest.MapFS{}, "empty", testReader(t)); err == nil {
		t.Fatal("no files: no error")
	}
}
