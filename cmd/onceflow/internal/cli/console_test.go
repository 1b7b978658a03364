package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `onceflow serve` serves the web console at /ui/ on its API address, or on --ui-addr
// alone, or not at all with --ui-addr off.
func TestServeConsole(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte("name: w\nsteps:\n  - id: a\n    kind: http\n    http: {url: \"http://127.0.0.1:1/\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := "sqlite://" + filepath.Join(t.TempDir(), "onceflow.db")
	runOK(t, "migrate", "--db", db)
	t.Setenv("ONCEFLOW_API_TOKENS", "viewer:read:read-secret-0123456789")
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Security-Policy") + "\n" + string(b)
	}
	for _, tc := range []struct {
		name string
		// ui is where the console should answer (api or own), "" for nowhere.
		ui string
	}{{"on the API address", "api"}, {"on --ui-addr", "own"}, {"off", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			api, own := freeAddr(t), freeAddr(t)
			args := []string{"serve", "--addr", api, "--workflows", dir, "--db", db, "--log-level", "error"}
			switch tc.name {
			case "on --ui-addr":
				args = append(args, "--ui-addr", own)
			case "off":
				args = append(args, "--ui-addr", "off")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			exit := make(chan result, 1)
			go func() {
				var out, errOut strings.Builder
				code := execute(ctx, args, &out, &errOut, apiMiddleware)
				exit <- result{stdout: out.String(), stderr: errOut.String(), code: code}
			}()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(30 * time.Second)
			for {
				if code, _ := get("http://" + api + "/healthz"); code == http.StatusOK {
					break
				}
				select {
				case <-tick.C:
				case <-deadline:
					t.Fatal("serve did not answer /healthz within 30 s")
				case r := <-exit:
					t.Fatalf("serve exited early: %d %s", r.code, r.stderr)
				}
			}
			for where, addr := range map[string]string{"api": api, "own": own} {
				code, body := get("http://" + addr + "/ui/login")
				if where == tc.ui {
					if code != http.StatusOK || !strings.Contains(body, "script-src 'self'") || !strings.Contains(body, `id="token"`) {
						t.Errorf("/ui/login on the %s address: %d\n%s", where, code, body)
					}
				} else if code == http.StatusOK {
					t.Errorf("/ui/login answered on the %s address", where)
				}
			}
			cancel()
			if r := <-exit; r.code != exitOK {
				t.Fatalf("serve: exit %d %s", r.code, r.stderr)
			}
		})
	}
}
