package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// serve says at start where the console answers: beside the API, on --ui-addr, or off.
func TestServeLogsTheConsoleURL(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ping.yaml"), []byte("name: ping\nsteps:\n  - id: ping\n    kind: http\n    effect_key: \"ping:{input.id}\"\n    http: {url: \"http://127.0.0.1:1/ping\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"beside the API", nil},
		{"on its own address", []string{"--ui-addr", "127.0.0.1:0"}},
		{"off", []string{"--ui-addr", "off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--db", "sqlite://" + filepath.Join(t.TempDir(), "c.db"), "--workflows", dir, "--addr", "127.0.0.1:0"}, tc.args...)
			c := startCommand(t, []string{"ONCEFLOW_API_TOKENS=ops:admin:admin-secret-0123456789"}, args...)
			line := c.waitLog("onceflow serving", 1)
			console, _ := line["console"].(string)
			switch tc.name {
			case "beside the API":
				if want := line["addr"].(string) + "/ui/"; console != want {
					t.Fatalf("serve logged the console at %q, want %q", console, want)
				}
			case "on its own address":
				if want := c.waitLog("serving the web console", 1)["addr"].(string); console != want || console == line["addr"].(string)+"/ui/" {
					t.Fatalf("serve logged the console at %q, want %q", console, want)
				}
			case "off":
				if console != "off" {
					t.Fatalf("serve logged the console at %q, want off", console)
				}
				return
			}
			resp, err := http.Get(console + "login")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %slogin: %d", console, resp.StatusCode)
			}
		})
	}
}
