package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store"
)

// secretRun stores one completed run whose output holds what the API masks: a password,
// an API key and an echoed bearer token.
func secretRun(t *testing.T) (db string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Register(onceflow.Workflow{Name: "signup", Steps: []onceflow.Step{{ID: "crm", EffectKey: "crm:{input.id}",
		Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return map[string]any{"id": 7, "password": "pw-canary-111", "api_key": "key-canary-222",
				"echo": map[string]any{"authorization": "Bearer tok-canary-333"}}, nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "signup", "s-1", map[string]any{"id": "1", "card": "4111-canary-444"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	return "sqlite://" + path
}

var canaries = []string{"pw-canary-111", "key-canary-222", "tok-canary-333", "4111-canary-444"}

// The review commands mask a parked step's last error and response as the API does: a
// destination that echoes the input's personal data (fields of ONCEFLOW_REDACT_FIELDS)
// does not put it on the terminal.
func TestReviewListAndShowMask(t *testing.T) {
	t.Setenv(envRedactFields, "card, password")
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Register(onceflow.Workflow{Name: "pay", Steps: []onceflow.Step{{ID: "charge", EffectKey: "charge:{input.id}",
		Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(fmt.Errorf("gateway refused card 4111-canary-444 for password pw-canary-111"))
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "pay", "p-1", map[string]any{"id": "1", "card": "4111-canary-444", "password": "pw-canary-111"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	db := "sqlite://" + path
	for _, args := range [][]string{
		{"review", "list", "--db", db},
		{"review", "list", "--db", db, "--json"},
		{"review", "show", "--db", db, "1", "charge"},
		{"review", "show", "--db", db, "--json", "1", "charge"},
	} {
		r := runOK(t, args...)
		if !strings.Contains(r.stdout, "gateway refused") {
			t.Fatalf("onceflow %s does not show the item:\n%s", strings.Join(args, " "), r.stdout)
		}
		for _, c := range []string{"4111-canary-444", "pw-canary-111"} {
			if strings.Contains(r.stdout, c) {
				t.Errorf("onceflow %s shows %s:\n%s", strings.Join(args, " "), c, r.stdout)
			}
		}
	}
}

func TestRunsShowAndKeysShowMask(t *testing.T) {
	db := secretRun(t)
	for _, args := range [][]string{
		{"runs", "show", "--db", db, "--json", "1"},
		{"runs", "show", "--db", db, "1"},
		{"keys", "show", "--db", db, "--json", "crm:1"},
		{"keys", "show", "--db", db, "crm:1"},
	} {
		r := runOK(t, args...)
		for _, c := range canaries {
			if strings.Contains(r.stdout, c) {
				t.Errorf("onceflow %s shows %s:\n%s", strings.Join(args, " "), c, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "[redacted]") {
			t.Errorf("onceflow %s masks nothing:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	// An operator who needs the data asks for it, and the audit trail says who did.
	r := runOK(t, "runs", "show", "--db", db, "--json", "--unmasked", "--actor", "cli:ops-ana", "1")
	if !strings.Contains(r.stdout, "pw-canary-111") {
		t.Fatalf("--unmasked masked the output:\n%s", r.stdout)
	}
	runOK(t, "keys", "show", "--db", db, "--unmasked", "--actor", "cli:ops-ben", "crm:1")
	st := openSQLite(t, strings.TrimPrefix(db, "sqlite://"))
	defer st.Close()
	evs, err := st.EventList(context.Background(), store.EventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	actors := map[string]bool{}
	for _, e := range evs {
		if e.Type == store.EventDataUnmasked {
			actors[e.Actor] = true
		}
	}
	if !actors["cli:ops-ana"] || !actors["cli:ops-ben"] {
		t.Fatalf("unmasked reads audited by %v", actors)
	}
}

// writeFile writes a workflow file into dir and returns its path.
func writeFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

const urlsYAML = `name: urls
secrets: [HOOK_URL]
steps:
  - id: hook
    kind: http
    effect_key: "hook:{input.id}"
    retry: {max_attempts: 1}
    http: {url: "{env.HOOK_URL}"}
  - id: crm
    kind: http
    effect_key: "crm:{input.id}"
    retry: {max_attempts: 1}
    http: {url: "{env.CRM_URL}/leads"}
  - id: internal
    kind: http
    effect_key: "internal:{input.id}"
    retry: {max_attempts: 1}
    http: {url: "{env.INTERNAL_URL}/x"}
`

// openHookYAML reads a webhook URL from a variable no file declares secret.
const openHookYAML = `name: open
steps:
  - id: hook
    kind: http
    effect_key: "open:{input.id}"
    retry: {max_attempts: 1}
    http: {url: "{env.OPEN_HOOK_URL}"}
`

// A secret URL's path never shows, in the stored attempts, steps, audit events, logs,
// the API's run view and audit trail or runs show, although error texts name requests by
// scheme, host and path; nor does the token in the path of a URL from a variable nobody
// declared secret. A URL that is configuration (CRM_URL) shows, so the operator sees
// where a request went; a refused destination names its address and the flag that
// opens it.
func TestURLsFromTheEnvironment(t *testing.T) {
	addr := closedPort(t)
	env := map[string]string{
		"HOOK_URL":      "http://" + addr + "/services/T0001/B0001/SECRETpathTOKEN42?channel=ops",
		"OPEN_HOOK_URL": "http://" + addr + "/services/T0002/B0002/OPENpathTOKEN77?channel=ops",
		"CRM_URL":       "http://" + addr,
		"INTERNAL_URL":  "http://127.0.0.2:9",
	}
	leaks := []string{"SECRETpathTOKEN42", "OPENpathTOKEN77"}
	dir := t.TempDir()
	writeFile(t, dir, "urls.yaml", urlsYAML)
	writeFile(t, dir, "open.yaml", openHookYAML)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	defer st.Close()
	logs := &lockedBuffer{}
	admin := onceflowhttp.Token{Name: "ops", Secret: "admin-secret-0123456789", Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeAdmin}}
	a, err := server.New(ctx, server.Config{Store: st, Workflows: []string{dir}, AllowNet: loopback, Engine: onceflow.Config{Workers: 2},
		Logger:     slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Env:        func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		API:        &server.APIConfig{Tokens: []onceflowhttp.Token{admin}},
		Middleware: apiMiddleware})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i, wf := range []string{"urls", "open"} {
		if _, err := a.Client().Start(ctx, wf, fmt.Sprint("u-", i), map[string]any{"id": "1"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		if _, err := a.Client().Work(ctx); err != nil {
			t.Fatal(err)
		}
	}
	errs := map[string]string{}
	for run := int64(1); run <= 2; run++ {
		steps, err := st.StepListByRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if s.State != store.StateNeedsReview {
				t.Fatalf("run %d: step %s is %s, want needs_review", run, s.Name, s.State)
			}
			errs[fmt.Sprint(run, "/", s.Name)] = s.LastError
		}
	}
	if !strings.Contains(errs["1/crm"], "http://"+addr+"/leads") {
		t.Errorf("the crm error hides its URL: %s", errs["1/crm"])
	}
	if !strings.Contains(errs["1/internal"], "127.0.0.2") || !strings.Contains(errs["1/internal"], "--allow-net 127.0.0.2/32") {
		t.Errorf("the blocked destination's error: %s", errs["1/internal"])
	}
	if want := "http://" + addr + "/services/T0002/B0002/[redacted]"; !strings.Contains(errs["2/hook"], want) {
		t.Errorf("the undeclared hook's error: %s, want it to show %s", errs["2/hook"], want)
	}
	if !strings.Contains(errs["1/hook"], "[redacted]") {
		t.Errorf("the hook error: %s", errs["1/hook"])
	}

	texts := map[string]string{"steps": fmt.Sprint(errs), "logs": logs.String()}
	for _, run := range []string{"1", "2"} {
		texts["runs show "+run] = runOK(t, "runs", "show", "--db", "sqlite://"+path, "--json", run).stdout
	}
	// The stored rows, as any reader of the database sees them.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, table := range []string{"attempts", "steps", "events"} {
		rows, err := db.Query("SELECT * FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				all = append(all, fmt.Sprint(v))
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if len(all) == 0 {
			t.Fatalf("table %s: no rows", table)
		}
		texts["table "+table] = strings.Join(all, " | ")
	}
	// The API's run view and audit trail.
	h := a.Handler()
	for _, target := range []string{"/v1/runs/1", "/v1/runs/2", "/v1/audit?run=1", "/v1/audit?run=2"} {
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", "Bearer "+admin.Secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
		texts["GET "+target] = rec.Body.String()
	}
	for what, text := range texts {
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s show %s:\n%s", what, leak, text)
			}
		}
	}
}

// validate takes directories and files together and reports every problem of every file
// in one pass.
func TestValidateDirectoriesReportsEverything(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", "name: a\nsteps:\n  - id: x\n    kind: ftp\n  - id: y\n    kind: go\n    func: f\n    needs: [zz]\n")
	b := writeFile(t, dir, "b.yml", "name: b\nsteps:\n  - id: m\n    kind: email\n    effect_key: \"m:{input.id}\"\n    email: {from: a@example.com, to: \"{input.email}\", subject: \"{foo}\"}\n")
	other := t.TempDir()
	c := writeFile(t, other, "c.yaml", "name: c\nsteps:\n  - id: h\n    kind: http\n    effect_key: \"h:{input.id}\"\n    http: {url: \"https://example.com/{run.nope}\"}\n")
	r := run(t, "validate", dir, c)
	for _, want := range []string{a + ":4:", a + ":8:", b + ":6:", "{foo}", c + ":6:", "{run.nope}", "4 problem(s) in 3 file(s)"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("validate does not say %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if r.code != exitError {
		t.Errorf("exit %d", r.code)
	}
	if r := run(t, "validate", filepath.Join(dir, "missing")); r.code != exitError || !strings.Contains(r.stdout, "missing") {
		t.Errorf("a missing path: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	good := writeFile(t, t.TempDir(), "good.yaml", "name: good\nsteps:\n  - id: x\n    kind: go\n    func: f\n")
	if r := runOK(t, "validate", filepath.Dir(good)); !strings.Contains(r.stdout, `workflow "good" is valid`) {
		t.Errorf("validate DIR: %s", r.stdout)
	}
}

// serve and worker take a file as well as a directory, and refuse to start when a step
// reads an environment variable that is not set, naming the file, the step and the
// variable.
func TestStartChecksTheEnvironment(t *testing.T) {
	file := writeFile(t, t.TempDir(), "urls.yaml", urlsYAML)
	st := openSQLite(t, filepath.Join(t.TempDir(), "onceflow.db"))
	defer st.Close()
	env := map[string]string{"HOOK_URL": "http://127.0.0.1:9/x"}
	_, err := server.New(context.Background(), server.Config{Store: st, Workflows: []string{file}, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err == nil {
		t.Fatal("started without CRM_URL and INTERNAL_URL")
	}
	for _, want := range []string{file + ":13:", `step "crm" reads {env.CRM_URL}`, "CRM_URL is not set", `step "internal"`, "INTERNAL_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	env["CRM_URL"], env["INTERNAL_URL"] = "http://127.0.0.1:9", "http://127.0.0.1:9"
	a, err := server.New(context.Background(), server.Config{Store: st, Workflows: []string{file}, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatalf("a single file with its environment: %v", err)
	}
	defer a.Close()
	if got := a.Client().Workflows(); len(got) != 1 || got[0] != "urls" {
		t.Fatalf("workflows %v", got)
	}
}

// serve refuses to start when a webhook's secret is missing or malformed.
func TestServeRefusesWebhookWithoutSecret(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "hook.yaml", "name: hooked\nwebhook:\n  name: pay\n  scheme: standard-webhooks\n  secret_env: [PAY_HOOK_SECRET]\n  event_id: \"{input.id}\"\nsteps:\n  - id: x\n    kind: http\n    effect_key: \"x:{input.id}\"\n    http: {url: \"https://example.com\"}\n")
	db := "sqlite://" + filepath.Join(t.TempDir(), "onceflow.db")
	t.Setenv("PAY_HOOK_SECRET", "whsec_not base64!")
	r := run(t, "serve", "--db", db, "--workflows", dir, "--addr", "127.0.0.1:0")
	if r.code != exitError || !strings.Contains(r.stderr, `webhook "pay"`) || !strings.Contains(r.stderr, "PAY_HOOK_SECRET") || strings.Contains(r.stderr, "not base64!") {
		t.Fatalf("exit %d\nstderr %s", r.code, r.stderr)
	}
}

// A step output nested 9,990 levels deep (a destination's answer of 50 KB) is printed by
// runs show --json and keys show --json as one string holding it: indenting it would
// print hundreds of megabytes, and the output could not be encoded at all once wrapped
// in the run's document.
func TestDeepOutputIsPrintedAsItIsStored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	st := openSQLite(t, path)
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	deep := `{"id":"deep","x":` + strings.Repeat(`{"a":`, 9989) + `1` + strings.Repeat(`}`, 9989) + `}`
	err = c.Register(onceflow.Workflow{Name: "deep", Steps: []onceflow.Step{{ID: "fetch", EffectKey: "fetch:{input.id}",
		Do: func(context.Context, *onceflow.StepContext) (any, error) { return json.RawMessage(deep), nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "deep", "d-1", map[string]any{"id": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, args := range [][]string{
		{"runs", "show", "--db", "sqlite://" + path, "--json", "1"},
		{"keys", "show", "--db", "sqlite://" + path, "--json", "fetch:1"},
	} {
		out := runOK(t, args...).stdout
		if len(out) > 4*len(deep) {
			t.Fatalf("onceflow %s printed %d bytes for a %d-byte output", strings.Join(args, " "), len(out), len(deep))
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("onceflow %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(out, `"{\"id\":\"deep\",\"x\":{\"a\":{\"a\":`) {
			t.Fatalf("onceflow %s does not print the output as a string: %.300s", strings.Join(args, " "), out)
		}
	}
}
