package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store/sqlite"
)

const leadYAML = `name: lead
steps:
  - id: score
    kind: go
    func: noop
`

func noop(context.Context, *onceflow.StepContext) (any, error) { return map[string]any{}, nil }

// setup writes files into a directory and opens a SQLite store beside them.
func setup(t *testing.T, files map[string]string) (string, *sqlite.Store) {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return dir, st
}

// A mistake in the Config is a *ConfigError naming the field and what to change, and
// nothing is left open.
func TestNewRefusesConfigMistakes(t *testing.T) {
	dir, st := setup(t, map[string]string{"lead.yaml": leadYAML})
	funcs := map[string]onceflow.StepFunc{"noop": noop}
	for _, tc := range []struct {
		cfg   server.Config
		field string
	}{
		{server.Config{Workflows: []string{dir}}, "Store"},
		{server.Config{Store: st}, "Workflows"},
		{server.Config{Store: st, Workflows: []string{dir}, Funcs: funcs, Console: &server.ConsoleConfig{}}, "Console"},
		{server.Config{Store: st, Workflows: []string{dir}, Funcs: funcs, Metrics: &server.MetricsConfig{}}, "Metrics"},
		{server.Config{Store: st, Workflows: []string{dir}, Funcs: funcs, API: &server.APIConfig{Addr: "127.0.0.1:0"},
			Console: &server.ConsoleConfig{OIDC: &onceflowui.OIDC{Issuer: "https://sso.example.com", ClientID: "console"}}}, "Console.OIDC"},
		{server.Config{Store: st, Workflows: []string{dir}, Funcs: funcs, API: &server.APIConfig{Addr: "127.0.0.1:0"},
			Console: &server.ConsoleConfig{NoTokenSignIn: true}}, "Console.OIDC"},
		{server.Config{Store: st, Workflows: []string{dir}, Funcs: funcs, RedactFields: []string{"customer..name"}}, "RedactFields"},
		{server.Config{Store: st, Workflows: []string{dir}, Funcs: funcs, Metrics: &server.MetricsConfig{Addr: "127.0.0.1:-1"}}, "Metrics.Addr"},
	} {
		_, err := server.New(context.Background(), tc.cfg)
		var ce *server.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || ce.Problem == "" {
			t.Errorf("New with a mistake in %s = %v", tc.field, err)
		}
	}
}

// Run serves the API, the console on its own listener and the metrics on theirs, and
// returns nil once its context ends.
func TestRunServesAndStops(t *testing.T) {
	dir, st := setup(t, map[string]string{"lead.yaml": leadYAML})
	ctx, cancel := context.WithCancel(context.Background())
	roles, err := onceflowui.ParseOIDCRoles("ops=admin")
	if err != nil {
		t.Fatal(err)
	}
	oidc := &onceflowui.OIDC{Issuer: "https://sso.example.com", ClientID: "console", ClientSecret: "from-the-environment",
		RedirectURL: "https://ops.example.com/ui/oidc/callback", Roles: roles, Label: "Example SSO"}
	srv, err := server.New(ctx, server.Config{Store: st, Workflows: []string{dir}, Funcs: map[string]onceflow.StepFunc{"noop": noop},
		API: &server.APIConfig{Addr: "127.0.0.1:0"}, Console: &server.ConsoleConfig{Addr: "127.0.0.1:0", OIDC: oidc},
		Metrics: &server.MetricsConfig{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	get := func(name, path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + srv.Addr(name).String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("api", "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d %s", code, body)
	}
	if code, body := get("metrics", "/metrics"); code != http.StatusOK || !strings.Contains(body, "onceflow_") {
		t.Fatalf("/metrics %d", code)
	}
	if code, _ := get("api", "/metrics"); code != http.StatusNotFound {
		t.Fatalf("/metrics on the API: %d, want 404 (they have their own address)", code)
	}
	if code, body := get("console", "/ui/login"); code != http.StatusOK || !strings.Contains(body, "Sign in with Example SSO") {
		t.Fatalf("console: %d, without the OpenID Connect sign-in:\n%s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
