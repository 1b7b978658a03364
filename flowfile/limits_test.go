package flowfile

import (
	"context"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
)

func funcs() map[string]onceflow.StepFunc {
	return map[string]onceflow.StepFunc{"f": func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}
}

func TestLimitsAreChecked(t *testing.T) {
	src := `name: w
limits:
  - {host: api.crm.example, concurrency: 4, per_second: 10, burst: 5}
  - {concurrency: 2}
  - {host: "https://api.crm.example/leads", concurrency: 1}
  - {host: API.crm.example, per_second: 1}
  - {host: other.example, burst: 3}
steps:
  - id: a
    kind: http
    effect_key: "a:{input.id}"
    http: {url: "https://api.crm.example/a"}
    limits: {concurrency: -1, host: x.example}
  - id: b
    kind: go
    func: f
    effect_key: "b:{input.id}"
    limits: {concurrency: 1}
`
	_, ps := testReader.Parse("w.yaml", []byte(src))
	got := ps.Error()
	for _, want := range []string{
		`w.yaml:4:5: a limit in limits: needs the host it applies to`,
		`w.yaml:5:12: host "https://api.crm.example/leads": write only the host name`,
		`w.yaml:6:12: host "API.crm.example" is limited twice (also limits[0])`,
		`w.yaml:7:34: burst needs per_second`,
		`w.yaml:7:5: a limit needs concurrency (requests in flight) or per_second`,
		`step "a": a step's limits apply to its own requests and take no host`,
		`concurrency -1 is negative`,
		`step "b": limits apply to http steps only`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
}

// Two files limiting one host differently cannot both be built: the limit would depend on
// which file was read first.
func TestConflictingHostLimitsAcrossFiles(t *testing.T) {
	mk := func(name string, n int) *Definition {
		src := "name: " + name + "\nlimits:\n  - {host: api.example, concurrency: " + string(rune('0'+n)) + "}\nsteps:\n  - id: s\n    kind: go\n    func: f\n"
		d, ps := withFuncs(t, funcs()).Parse(name+".yaml", []byte(src))
		if ps != nil {
			t.Fatal(ps)
		}
		return d
	}
	_, err := NewBuilder(BuildOptions{}).Workflows([]*Definition{mk("a", 2), mk("b", 3)})
	if err == nil || !strings.Contains(err.Error(), `b.yaml:3:5: host "api.example" has another limit already`) {
		t.Fatalf("Build = %v", err)
	}
	if _, err := NewBuilder(BuildOptions{}).Workflows([]*Definition{mk("a", 2), mk("b", 2)}); err != nil {
		t.Fatalf("the same limit twice: %v", err)
	}
}
