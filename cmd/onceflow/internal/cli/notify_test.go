package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/server"
)

// serve and worker wire the notify blocks of the workflow files: a refused step alerts the
// Slack webhook the environment names, through the channel's own run.
func TestAppNotifies(t *testing.T) {
	var mu sync.Mutex
	var texts []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		texts = append(texts, string(b))
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	defer hook.Close()
	dir := t.TempDir()
	src := "name: signup\nnotify:\n  slack: {webhook: \"{env.SLACK_OPS_WEBHOOK}\"}\nsteps:\n  - id: crm\n    kind: go\n    func: crm\n"
	if err := os.WriteFile(filepath.Join(dir, "signup.yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := openSQLite(t, filepath.Join(t.TempDir(), "db"))
	defer st.Close()
	env := map[string]string{"SLACK_OPS_WEBHOOK": hook.URL + "/services/T0/B0/x"}
	a, err := server.New(ctx, server.Config{Store: st, Workflows: []string{dir}, AllowNet: loopback, Engine: onceflow.Config{Workers: 2}, Logger: slog.New(slog.DiscardHandler),
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Funcs: map[string]onceflow.StepFunc{"crm": func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(errors.New("customer refused"))
		}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if wfs := a.Client().Workflows(); !slices.Contains(wfs, "onceflow.notify-slack.slack_ops_webhook") {
		t.Fatalf("workflows %q lack the Slack channel", wfs)
	}
	if _, err := a.Client().Start(ctx, "signup", "s-1", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.Client().Work(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Client().Notify(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Client().Work(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(texts) != 1 || !strings.Contains(texts[0], "signup/crm (permanent_error) needs review") {
		t.Fatalf("webhook got %q, want one alert", texts)
	}
}
