package steps_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/steps/steptest"
	"github.com/onceflow/onceflow/store/sqlite"
)

// crmKind is a step kind written outside onceflow: `kind: crm-upsert` creates or updates a
// CRM record by its external id, with the effect key as Idempotency-Key.
type crmKind struct {
	base   string
	client *http.Client
}

// crmSettings are a crm-upsert step's `crm:` block.
type crmSettings struct {
	Object     string            `yaml:"object"`      // lead or contact
	ExternalID string            `yaml:"external_id"` // a template
	Fields     map[string]string `yaml:"fields"`      // templates

	kind *crmKind
}

func (k *crmKind) Spec() steps.Spec {
	return steps.Spec{
		Name: "crm-upsert", Block: "crm",
		Summary: "Creates or updates a CRM record by its external id.",
		Doc:     "PUT {base}/{object}s/{external_id} with the fields as JSON; the CRM keeps one record per external id.",
		Example: "- id: upsert\n  kind: crm-upsert\n  effect_key: \"crm:{input.id}\"\n  crm: {object: lead, external_id: \"{input.id}\"}\n",
		Schema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["object", "external_id"],
			"properties": {"object": {"enum": ["lead", "contact"]}, "external_id": {"$ref": "#/$defs/template"},
				"fields": {"type": "object", "additionalProperties": {"$ref": "#/$defs/template"}}}}`),
		Settings: reflect.TypeFor[crmSettings](),
	}
}

func (k *crmKind) Decode(s block.Settings) (steps.Config, error) {
	c := &crmSettings{kind: k}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *crmSettings) Walk(w block.Walker) {
	if c.Object != "lead" && c.Object != "contact" {
		w.Problem("object", "object %q is not lead or contact", c.Object)
	}
	w.Template("external_id", c.ExternalID, block.Use{Label: "crm external_id", ReportParse: true})
	for _, f := range slices.Sorted(maps.Keys(c.Fields)) {
		w.Template("fields."+f, c.Fields[f], block.Use{Label: "crm field " + f, ReportParse: true})
	}
}

// OnUnknown leaves an unknown outcome to the engine: the CRM keeps one record per external
// id, so sending the upsert again is safe.
func (c *crmSettings) OnUnknown() onceflow.UnknownAction { return "" }

func (c *crmSettings) Build(b *steps.Build) (onceflow.StepFunc, error) {
	id, err := steps.ParseTemplate(c.ExternalID)
	if err != nil {
		return nil, err
	}
	fields := map[string]*steps.Template{}
	for name, src := range c.Fields {
		if fields[name], err = steps.ParseTemplate(src); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
		ext, err := id.Render(sc, b.Env)
		if err != nil {
			return nil, onceflow.PermanentError(err)
		}
		body := map[string]string{}
		for name, t := range fields {
			if body[name], err = t.Render(sc, b.Env); err != nil {
				return nil, onceflow.PermanentError(err)
			}
		}
		raw, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.kind.base+"/"+c.Object+"s/"+ext, strings.NewReader(string(raw)))
		if err != nil {
			return nil, onceflow.PermanentError(err)
		}
		req.Header.Set("Idempotency-Key", sc.EffectKey)
		resp, err := c.kind.client.Do(req)
		if err != nil {
			return nil, onceflow.UnknownOutcomeError(err) // it may have arrived
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode >= 500:
			return nil, fmt.Errorf("the CRM answered %d", resp.StatusCode) // retried
		case resp.StatusCode >= 300:
			return nil, onceflow.PermanentError(fmt.Errorf("the CRM refused the record: %d", resp.StatusCode))
		}
		return map[string]string{"external_id": ext}, nil
	}, nil
}

// crm is a CRM that counts the upserts of each record; its next answers can be chosen
// (the conformance test below).
type crm struct {
	*httptest.Server
	mu      sync.Mutex
	records map[string]int
	keys    []string
	next    []steptest.Outcome
}

func newCRM() *crm {
	c := &crm{records: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.records[r.URL.Path]++
		c.keys = append(c.keys, r.Header.Get("Idempotency-Key"))
		o := steptest.Success
		if len(c.next) > 0 {
			o, c.next = c.next[0], c.next[1:]
		}
		c.mu.Unlock()
		switch o {
		case steptest.Retryable:
			w.WriteHeader(http.StatusServiceUnavailable)
		case steptest.Permanent:
			w.WriteHeader(http.StatusUnprocessableEntity)
		case steptest.Unknown:
			<-r.Context().Done() // applied, and no answer before the client gives up
		}
	}))
	return c
}

func (c *crm) upserts(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records[path]
}

const leadYAML = `name: lead
run_key: "{input.id}"
steps:
  - id: upsert
    kind: crm-upsert
    effect_key: "crm:{input.id}"
    crm:
      object: lead
      external_id: "{input.id}"
      fields: {email: "{input.email}"}
`

// A program registers a step kind of its own beside the standard ones — one line — and
// uses it from a workflow file. A form posted twice upserts the lead once.
func Example_customKind() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "steps-example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "lead.yaml"), []byte(leadYAML), 0o600)
	dest := newCRM()
	defer dest.Close()

	st, err := sqlite.Open(ctx, filepath.Join(dir, "onceflow.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	kinds, err := stdsteps.New(stdsteps.Options{Env: os.LookupEnv, Store: st})
	if err != nil {
		log.Fatal(err)
	}
	defer kinds.Close()
	if err := kinds.Add(&crmKind{base: dest.URL, client: dest.Client()}); err != nil { // the one registry line
		log.Fatal(err)
	}
	defs, err := (&flowfile.Reader{Kinds: kinds}).Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	workflows, err := flowfile.NewBuilder(flowfile.BuildOptions{Store: st, Env: os.LookupEnv}).Workflows(defs)
	if err != nil {
		log.Fatal(err)
	}
	client, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Register(workflows[0]); err != nil {
		log.Fatal(err)
	}
	in := map[string]any{"id": 8812, "email": "ada@example.com"}
	for range 2 { // the form posted twice
		if _, err := client.Start(ctx, "lead", "form-8812", in); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := client.Work(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(dest.upserts("/leads/8812"))
	// Output: 1
}

// The kind is in the schema of the registry that holds it, and its block is decoded
// strictly: a typo is a problem at its line and column.
func TestCustomKindInSchemaAndChecks(t *testing.T) {
	kinds, err := stdsteps.New(stdsteps.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := kinds.Add(&crmKind{}); err != nil {
		t.Fatal(err)
	}
	doc, err := flowfile.Schema(kinds, nil)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(doc, &schema); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(schema.Defs["step"].Properties["kind"].Enum, "crm-upsert") || len(schema.Defs["crm-upsert"].Properties) != 3 {
		t.Errorf("the schema lacks the kind: %v", schema.Defs["step"].Properties["kind"].Enum)
	}
	r := &flowfile.Reader{Kinds: kinds}
	_, ps := r.Parse("lead.yaml", []byte(strings.Replace(leadYAML, "      object: lead", "      objct: lead", 1)))
	if ps.Error() != `lead.yaml:8:7: unknown field "objct"` {
		t.Errorf("a typo in the kind's block: %v", ps)
	}
	_, ps = r.Parse("lead.yaml", []byte(strings.Replace(leadYAML, "object: lead", "object: deal", 1)))
	var want flowfile.Problems
	if !errors.As(ps, &want) || !strings.Contains(ps.Error(), `lead.yaml:8:15: step "upsert": object "deal" is not lead or contact`) {
		t.Errorf("a value the kind refuses: %v", ps)
	}
}

// The kind passes the conformance suite, against a CRM whose answers the test chooses.
func TestCustomKindConformance(t *testing.T) {
	steptest.Exercise(t, func(t *testing.T) steptest.Harness {
		dest := newCRM()
		t.Cleanup(dest.Close)
		client := dest.Client()
		client.Timeout = 500 * time.Millisecond
		return steptest.Harness{
			Kind:  &crmKind{base: dest.URL, client: client},
			Block: "object: lead\nexternal_id: \"{input.id}\"\n",
			Arrange: func(_ *testing.T, o steptest.Outcome) bool {
				dest.mu.Lock()
				dest.next = append(dest.next, o)
				dest.mu.Unlock()
				return true
			},
			Identities: func(*testing.T) []string {
				dest.mu.Lock()
				defer dest.mu.Unlock()
				return append([]string(nil), dest.keys...)
			},
			Broken: "object: deal\nexternal_id: \"{input.id}\"\n",
		}
	})
}
