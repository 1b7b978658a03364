package steps_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
)

// fakeKind is a kind with a spec of the test's choosing.
type fakeKind struct {
	spec   steps.Spec
	alert  string
	closed *[]string
	err    error
}

func (k *fakeKind) Spec() steps.Spec                                   { return k.spec }
func (k *fakeKind) Decode(block.Settings) (steps.Config, error)        { return nil, nil }
func (k *fakeKind) AlertBlock() string                                 { return k.alert }
func (k *fakeKind) AlertChannel(block.Settings) (steps.Channel, error) { return steps.Channel{}, nil }
func (k *fakeKind) AlertSchema() json.RawMessage                       { return nil }
func (k *fakeKind) Close() error {
	*k.closed = append(*k.closed, k.spec.Name)
	return k.err
}

// plainKind is a kind that carries no notifications and holds nothing.
type plainKind struct{ spec steps.Spec }

func (k plainKind) Spec() steps.Spec                            { return k.spec }
func (k plainKind) Decode(block.Settings) (steps.Config, error) { return nil, nil }

func TestRegistryAddRefusesClashes(t *testing.T) {
	r := steps.NewRegistry()
	if err := r.Add(plainKind{steps.Spec{Name: "http"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(plainKind{steps.Spec{Name: "go", Block: "func"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind steps.Kind
		want string
	}{
		{nil, "Add(nil)"},
		{plainKind{steps.Spec{Name: "HTTP"}}, `kind name "HTTP" must be`},
		{plainKind{steps.Spec{Name: ""}}, `kind name "" must be`},
		{plainKind{steps.Spec{Name: "http"}}, "kind http is registered already"},
		{plainKind{steps.Spec{Name: "web", Block: "http"}}, `block "http" is kind http's`},
		{plainKind{steps.Spec{Name: "wait", Block: "delay"}}, `block "delay" is a field every step has`},
		{plainKind{steps.Spec{Name: "notify"}}, `block "notify" is a field every step has`},
		{plainKind{steps.Spec{Name: "crm", Block: "crm-x"}}, `block "crm-x" must be`},
		{plainKind{steps.Spec{Name: "crm", Defs: map[string]json.RawMessage{"other.x": nil}}}, `definition "other.x" must be named crm.SOMETHING`},
	} {
		err := r.Add(tc.kind)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add(%v) = %v, want an error containing %q", tc.kind, err, tc.want)
		}
	}
	var closed []string
	if err := r.Add(&fakeKind{spec: steps.Spec{Name: "pager"}, alert: "slack", closed: &closed}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(&fakeKind{spec: steps.Spec{Name: "chat"}, alert: "slack", closed: &closed}); err == nil || !strings.Contains(err.Error(), `notify field "slack" is kind pager's`) {
		t.Errorf("a second slack channel: %v", err)
	}
	if err := r.Add(&fakeKind{spec: steps.Spec{Name: "timer"}, alert: "window", closed: &closed}); err == nil || !strings.Contains(err.Error(), `notify field "window" is one every notify block has`) {
		t.Errorf("a channel named window: %v", err)
	}
	if got := r.Names("or"); got != "http, go or pager" {
		t.Errorf("Names = %q", got)
	}
	if k, ok := r.ByBlock("func"); !ok || k.Spec().Name != "go" {
		t.Errorf("ByBlock(func) = %v, %v", k, ok)
	}
	if a, ok := r.Alerter("slack"); !ok || a.Spec().Name != "pager" || len(r.Alerters()) != 1 {
		t.Errorf("Alerter(slack) = %v, %v", a, ok)
	}
}

// Close closes every kind that holds something, the last added first, joins their errors
// and does nothing the second time.
func TestRegistryClose(t *testing.T) {
	var closed []string
	r := steps.NewRegistry()
	for _, k := range []*fakeKind{
		{spec: steps.Spec{Name: "a"}, alert: "a", closed: &closed},
		{spec: steps.Spec{Name: "b"}, alert: "b", closed: &closed, err: errors.New("pool busy")},
		{spec: steps.Spec{Name: "c"}, alert: "c", closed: &closed},
	} {
		if err := r.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Add(plainKind{steps.Spec{Name: "d"}}); err != nil {
		t.Fatal(err)
	}
	err := r.Close()
	if err == nil || !strings.Contains(err.Error(), "close kind b: pool busy") || strings.Join(closed, ",") != "c,b,a" {
		t.Fatalf("Close = %v, closed %v", err, closed)
	}
	if err := r.Close(); err != nil || len(closed) != 3 {
		t.Errorf("second Close = %v, closed %v", err, closed)
	}
	var none *steps.Registry
	if err := none.Close(); err != nil {
		t.Errorf("nil registry: %v", err)
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"},
	} {
		if got := steps.List(tc.words, "or"); got != tc.want {
			t.Errorf("List(%q) = %q, want %q", tc.words, got, tc.want)
		}
	}
}
