package flowfile

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/httpstep"
	"github.com/onceflow/onceflow/steps/stdsteps"
)

// crmKind is a kind of the test's own, registered beside the standard ones.
type crmKind struct{}

type crmSettings struct {
	Object     string            `yaml:"object"`
	ExternalID string            `yaml:"external_id"`
	TokenEnv   string            `yaml:"token_env"`
	Fields     map[string]string `yaml:"fields"`
}

func (crmKind) Spec() steps.Spec {
	return steps.Spec{Name: "crm-upsert", Block: "crm", Settings: reflect.TypeFor[crmSettings](), ConnectionHint: "a CRM's address from CRM_URL"}
}

func (crmKind) Decode(s block.Settings) (steps.Config, error) {
	c := &crmSettings{}
	return c, s.Decode(c)
}

func (c *crmSettings) Walk(w block.Walker) {
	if c.Object != "lead" && c.Object != "contact" {
		w.Problem("object", "object %q is not lead or contact", c.Object)
	}
	w.Template("external_id", c.ExternalID, block.Use{Label: "crm external_id", ReportParse: true})
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range c.Fields {
			if !yield(k) {
				return
			}
		}
	}) {
		w.Template("fields."+k, c.Fields[k], block.Use{Label: "crm field " + k, Env: true, Secret: strings.HasPrefix(k, "secret"), ReportParse: true})
	}
	if c.TokenEnv != "" {
		w.EnvVar("token_env", c.TokenEnv, block.EnvUse{Label: "CRM token", Secret: true, Required: true})
	}
}

func (c *crmSettings) OnUnknown() onceflow.UnknownAction { return onceflow.ReviewUnknown }

func (c *crmSettings) Build(*steps.Build) (onceflow.StepFunc, error) {
	return func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }, nil
}

func crmReader(t *testing.T) *Reader {
	t.Helper()
	r := readerWith(t, stdsteps.Options{})
	if err := r.Kinds.Add(crmKind{}); err != nil {
		t.Fatal(err)
	}
	return r
}

// A kind registered from Go is read, checked and built like a standard one: the reader
// places its problems, checks its templates and records the environment it reads.
func TestReaderReadsARegisteredKind(t *testing.T) {
	r := crmReader(t)
	src := `name: leads
steps:
  - id: form
    kind: go
    func: f
  - id: upsert
    kind: crm-upsert
    effect_key: "crm:{input.id}"
    crm:
      object: deal
      external_id: "{steps.other.output.id}"
      token_env: CRM_TOKEN
      fields: {email: "{input.email}", owner: "{env.CRM_OWNER}", secret_key: "{env.CRM_SIGNING}"}
`
	_, ps := r.Parse("leads.yaml", []byte(src))
	got := ps.Error()
	for _, want := range []string{
		`leads.yaml:10:15: step "upsert": object "deal" is not lead or contact`,
		`leads.yaml:11:20: step "upsert": crm external_id reads {steps.other.output.id}: "other" is not a step this step needs`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	d, ps := r.Parse("leads.yaml", []byte(strings.Replace(strings.Replace(src, "object: deal", "object: lead", 1), "steps.other.output.id", "input.id", 1)))
	if ps != nil {
		t.Fatal(ps)
	}
	if names := d.EnvNames(); !slices.Equal(names, []string{"CRM_OWNER", "CRM_SIGNING", "CRM_TOKEN"}) {
		t.Errorf("EnvNames = %q", names)
	}
	if names := d.SecretNames(); !slices.Equal(names, []string{"CRM_SIGNING", "CRM_TOKEN"}) {
		t.Errorf("SecretNames = %q", names)
	}
	missing := d.CheckEnv(func(string) (string, bool) { return "", false }).Error()
	for _, want := range []string{
		`leads.yaml:12:18: step "upsert" reads its CRM token from the environment variable CRM_TOKEN, which is not set`,
		`step "upsert" reads {env.CRM_OWNER}, but the environment variable CRM_OWNER is not set`,
	} {
		if !strings.Contains(missing, want) {
			t.Errorf("CheckEnv lacks %q:\n%s", want, missing)
		}
	}
	ws, err := NewBuilder(BuildOptions{}).Workflows([]*Definition{d})
	if err == nil || !strings.Contains(err.Error(), `func "f" is not registered`) {
		t.Fatalf("Workflows = %v, %v", ws, err)
	}
	wf, err := d.skeleton()
	if err != nil || wf.Steps[1].OnUnknown != onceflow.ReviewUnknown {
		t.Errorf("the kind's default on_unknown: %v %v", wf.Steps[1].OnUnknown, err)
	}
}

// The kind lists of messages are the registry's, and a block of another kind is named.
func TestReaderNamesTheRegisteredKinds(t *testing.T) {
	r := crmReader(t)
	_, ps := r.Parse("w.yaml", []byte("name: w\nsteps:\n  - id: a\n    kind: ftp\n  - id: b\n    crm: {object: lead}\n  - id: c\n    kind: go\n    func: f\n    crm: {object: lead}\n"))
	got := ps.Error()
	for _, want := range []string{
		`w.yaml:4:11: step "a": kind "ftp" is not ` + r.Kinds.Names("or"),
		`w.yaml:5:7: step "b": kind is required (` + r.Kinds.Names("or") + `)`,
		`, go or crm-upsert`,
		`w.yaml:10:10: step "c" is of kind go; remove its crm settings`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	_, ps = r.Parse("w.yaml", []byte("name: w\nsteps:\n  - id: a\n    kind: crm-upsert\n    crm: {object: lead, url: x}\n"))
	if ps.Error() != `w.yaml:5:25: unknown field "url": connection settings come from the environment, never the file (a queue's broker URL from ONCEFLOW_NATS_URL or ONCEFLOW_AMQP_URL, or the variable its url_env names; a sql step's DSN from the variable its database names; a CRM's address from CRM_URL)` {
		t.Errorf("a connection field in the kind's block: %v", ps)
	}
}

// A decoding error stops the file with one problem, as the strict decoder does: two
// unknown fields in a kind's block are one problem, and an error in a step's block comes
// before one in its notify block and in a later step.
func TestReaderDecodingErrorIsOneProblem(t *testing.T) {
	_, ps := testReader.Parse("w.yaml", []byte("name: w\nsteps:\n  - id: a\n    kind: http\n    http: {url: x, verb: PUT, verbose: true}\n"))
	if len(ps) != 1 || !strings.Contains(ps[0].Message, `unknown field "verb`) {
		t.Errorf("two unknown fields: %v", ps)
	}
	_, ps = testReader.Parse("w.yaml", []byte("name: w\nsteps:\n  - id: a\n    kind: http\n    notify: {window: soon}\n    http: {url: x, timeout: 5x}\n  - {id: b, kind: go, func: [f]}\n"))
	if len(ps) != 1 || ps[0].Line != 6 || !strings.Contains(ps[0].Message, `"5x" is not a duration`) {
		t.Errorf("errors in a block, the notify block and a later step: %v", ps)
	}
	_, ps = testReader.Parse("w.yaml", []byte("name: w\nsteps:\n  - id: a\n    kind: http\n    retries: 3\n    http: {url: x, timeout: 5x}\n"))
	if len(ps) != 1 || ps[0].Line != 6 {
		t.Errorf("an error in a block and an unknown step field: %v", ps)
	}
	_, ps = testReader.Parse("w.yaml", []byte("name: w\nsteps:\n  - id: a\n    kind: http\n    retries: 3\n    http: {url: x}\n"))
	if len(ps) != 1 || ps[0].Line != 5 || ps[0].Message != `unknown field "retries"` {
		t.Errorf("an unknown step field: %v", ps)
	}
}

// Anchors and aliases resolve inside and across kinds' blocks, as in the rest of a file,
// merge keys included.
func TestReaderResolvesAliasesInBlocks(t *testing.T) {
	src := `name: w
steps:
  - id: a
    kind: http
    effect_key: "a:{input.id}"
    http: &req {url: "https://crm.example/leads", method: POST}
  - {id: b, kind: http, effect_key: "b:{input.id}", http: *req}
  - id: c
    kind: http
    effect_key: "c:{input.id}"
    http:
      <<: *req
      timeout: 5s
`
	d, ps := testReader.Parse("w.yaml", []byte(src))
	if ps != nil {
		t.Fatal(ps)
	}
	for i := range d.Steps {
		h, ok := d.Steps[i].Config.(*httpstep.Settings)
		if !ok || h.URL != "https://crm.example/leads" || h.Method != "POST" {
			t.Errorf("step %d: %#v, want POST https://crm.example/leads", i, d.Steps[i].Config)
		}
	}
	if h := d.Steps[2].Config.(*httpstep.Settings); time.Duration(h.Timeout) != 5*time.Second {
		t.Errorf("the merged block's own timeout: %v", time.Duration(h.Timeout))
	}
}
