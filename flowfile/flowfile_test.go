package flowfile

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

const leadYAML = `name: website-lead
description: A website form becomes a CRM lead and a sales task.
run_key: "{input.submission_id}"
entity: "lead:{input.submission_id}"
input:
  required: [submission_id, email]
steps:
  - id: crm
    kind: http
    effect_key: "lead-create:{input.submission_id}"
    retry: {max_attempts: 3, initial: 10ms, max: 1s}
    http:
      url: "{env.CRM_URL}/leads"
      headers: {Authorization: "Bearer {env.CRM_TOKEN}"}
      body: {email: "{input.email}", submission: "{input.submission_id}"}
      classify:
        - {status: "409", class: success}
  - id: vip_task
    kind: http
    needs: [crm]
    when: input.score > 80
    effect_key: "sales-task:{input.submission_id}"
    http:
      url: "{env.CRM_URL}/tasks"
      body: {lead: "{steps.crm.output.id}"}
  - id: note
    kind: go
    needs: [crm]
    func: note
`

func write(t *testing.T, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseValidFile(t *testing.T) {
	defs, err := testReader.LoadFiles(write(t, "lead.yaml", leadYAML))
	if err != nil {
		t.Fatal(err)
	}
	d := defs[0]
	if d.Name != "website-lead" || len(d.Steps) != 3 || time.Duration(d.Steps[0].Retry.Initial) != 10*time.Millisecond {
		t.Fatalf("definition %+v", d)
	}
	key, err := d.DeriveRunKey([]byte(`{"submission_id": 8812}`))
	if err != nil || key != "8812" {
		t.Fatalf("run key %q %v", key, err)
	}
}

// Every problem of a file is reported at its line and column.
func TestProblemsHavePositions(t *testing.T) {
	src := `name: broken
run_key: "{steps.a.output.id}"
webhook:
  name: Stripe Payments
  scheme: paypal
  secret_env: [whsec_abc]
steps:
  - id: a
    kind: http
    http: {url: "http://x/{input.a"}
  - id: b
    kind: smtp
    needs: [a, ghost]
  - id: c
    kind: go
    func: f
    on_exhausted: explode
    when: "input.x >"
    retention: someday
  - id: d
    kind: transition
    transition: {entity: "order:{input.id}", from: [Pending], to: paid}
`
	p := write(t, "broken.yaml", src)
	_, err := testReader.LoadFiles(p)
	ps, ok := err.(Problems)
	if !ok {
		t.Fatalf("error %v is not Problems", err)
	}
	got := ps.Error()
	for _, want := range []string{
		p + ":2:10: {steps.a.output.id}: run_key may read only {input.…}",
		p + ":4:9: webhook name \"Stripe Payments\" must be",
		p + ":5:11: ",
		p + ":6:16: \"whsec_abc\" is not an environment variable name",
		p + ":10:17: step \"a\": url:",
		p + ":12:11: step \"b\": kind \"smtp\" is not " + testReader.Kinds.Names("or"),
		p + ":13:12: step \"b\": needs \"ghost\", which is not a step of this workflow",
		p + ":17:19: step \"c\": on_exhausted \"explode\" is not needs_review or fail",
		p + ":18:11: step \"c\": when:",
		p + ":19:16: step \"c\": retention \"someday\"",
		p + ":22:17: step \"d\": state \"Pending\" must be lowercase",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q\ngot:\n%s", want, got)
		}
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Line < ps[i-1].Line {
			t.Fatalf("problems are not in line order:\n%s", got)
		}
	}
}

func TestYAMLErrorsHavePositions(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"syntax", "name: a\nsteps:\n  - id: [\n", ":3:"},
		{"unknown field", "name: a\nstepz: []\n", ":2:1: unknown field \"stepz\""},
		{"duplicate key", "name: a\nname: b\n", ":2:1: mapping key \"name\" already defined"},
		{"wrong type", "name: a\nsteps: 3\n", ":2:8:"},
		{"bad duration", "name: a\nsteps:\n  - id: s\n    kind: go\n    func: f\n    timeout: soon\n", ":6:14: \"soon\" is not a duration: it cannot be read; write a whole number and a unit, such as 90d"},
		{"duration without unit", "name: a\nsteps:\n  - id: s\n    kind: go\n    func: f\n    retry: {initial: 30}\n", ":6:22: \"30\" is not a duration: it has no unit"},
		{"days in a file", "name: a\nsteps:\n  - id: s\n    kind: go\n    func: f\n    timeout: 1.5d\n", ":6:14: \"1.5d\" is not a duration: use a whole number of days"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := testReader.LoadFiles(write(t, "x.yaml", tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDuplicateNamesAcrossFiles(t *testing.T) {
	a := write(t, "a.yaml", leadYAML)
	b := write(t, "b.yaml", leadYAML)
	_, err := testReader.LoadFiles(a, b)
	if err == nil || !strings.Contains(err.Error(), b+":1:7: workflow \"website-lead\" is also defined in "+a) {
		t.Fatalf("error %v", err)
	}
}

func TestBuildRequiresDependencies(t *testing.T) {
	defs, err := testReader.LoadFiles(write(t, "lead.yaml", leadYAML))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewBuilder(BuildOptions{}).Workflows(defs)
	if err == nil || !strings.Contains(err.Error(), `step "note": func "note" is not registered`) {
		t.Fatalf("error %v", err)
	}
}

// A workflow read from YAML runs end to end on the engine: the http step sends its
// templated request with the effect key, and the condition skips the VIP task.
func TestWorkflowFromFileRuns(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("Idempotency-Key")+" "+r.Header.Get("Authorization")+" "+string(b))
		mu.Unlock()
		w.WriteHeader(201)
		io.WriteString(w, `{"id": "lead_77"}`)
	}))
	defer srv.Close()

	noted := 0
	reader := readerWith(t, stdsteps.Options{AllowNet: loopback,
		Funcs: map[string]onceflow.StepFunc{"note": func(context.Context, *onceflow.StepContext) (any, error) {
			noted++
			return nil, nil
		}},
	})
	defs, err := reader.LoadFiles(write(t, "lead.yaml", leadYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CRM_URL": srv.URL, "CRM_TOKEN": "t0ken"}
	wfs, err := NewBuilder(BuildOptions{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}).Workflows(defs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(wfs[0]); err != nil {
		t.Fatal(err)
	}
	low, err := c.Start(ctx, "website-lead", "8812", json.RawMessage(`{"submission_id": 8812, "email": "a@example.com", "score": 10}`))
	if err != nil {
		t.Fatal(err)
	}
	high, err := c.Start(ctx, "website-lead", "8813", json.RawMessage(`{"submission_id": 8813, "email": "b@example.com", "score": 95}`))
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := c.Work(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	for _, id := range []int64{low.ID, high.ID} {
		r, _ := c.GetRun(ctx, id)
		if r.State != store.StateCompleted {
			t.Fatalf("run %d %s", id, r.State)
		}
	}
	steps, _ := st.StepListByRun(ctx, low.ID)
	if steps[1].State != store.StateSkipped {
		t.Fatalf("vip_task for a low score: %s", steps[1].State)
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{
		`/leads lead-create:8812 Bearer t0ken {"email":"a@example.com","submission":8812}`,
		`/tasks sales-task:8813  {"lead":"lead_77"}`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("requests lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "sales-task:8812") || noted != 2 {
		t.Fatalf("requests:\n%s\nnotes %d", joined, noted)
	}
}
