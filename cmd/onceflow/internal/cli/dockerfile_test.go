package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Dockerfile builds a static binary that reports its version, and the image's entry
// point and command serve the API as a non-root user. The image itself is not built
// here (that needs a registry); its build command and command line are run as they are
// written.
func TestDockerfileBuildAndCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	src, err := os.ReadFile("../../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(src)
	stages := regexp.MustCompile(`(?m)^FROM `).FindAllStringIndex(df, -1)
	final := df[stages[len(stages)-1][0]:]
	if len(stages) < 2 || !strings.Contains(final, "distroless/static") || !regexp.MustCompile(`(?m)^USER nonroot`).MatchString(final) ||
		!strings.Contains(df, "CGO_ENABLED=0 go build") {
		t.Fatalf("the Dockerfile is not a multi-stage build of a static binary run as nonroot:\n%s", df)
	}
	var entry, cmd []string
	for _, m := range regexp.MustCompile(`(?m)^(ENTRYPOINT|CMD) (\[.*\])$`).FindAllStringSubmatch(final, -1) {
		dst := &entry
		if m[1] == "CMD" {
			dst = &cmd
		}
		if err := json.Unmarshal([]byte(m[2]), dst); err != nil {
			t.Fatal(err)
		}
	}
	if len(entry) != 1 || len(cmd) == 0 || cmd[0] != "serve" {
		t.Fatalf("ENTRYPOINT %v CMD %v", entry, cmd)
	}

	// Every package of the command builds without cgo (go list reports those that cannot),
	// so CGO_ENABLED=0 makes a static binary.
	list := exec.Command("go", "list", "-e", "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", "github.com/onceflow/onceflow/cmd/onceflow")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := list.Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("without cgo: %v\n%s", err, out)
	}
	// Build with the Dockerfile's link flags (a full CGO_ENABLED=0 -trimpath build would
	// recompile every dependency: minutes).
	ldflags := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(df)
	if ldflags == nil {
		t.Fatal("no -ldflags in the Dockerfile")
	}
	bin := filepath.Join(t.TempDir(), "onceflow")
	build := exec.Command("go", "build", "-ldflags", strings.ReplaceAll(ldflags[1], "${VERSION}", "v9.8.7-test"), "-o", bin, "github.com/onceflow/onceflow/cmd/onceflow")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "onceflow v9.8.7-test\n") {
		t.Fatalf("version: %q %v (the -X path of the Dockerfile's VERSION is wrong?)", out, err)
	}

	// Run the image's command line, with the image's ONCEFLOW_DB moved to a temporary
	// directory and the address to a free loopback port (later flags win).
	workflows := t.TempDir()
	if err := os.WriteFile(filepath.Join(workflows, "ping.yaml"), []byte("name: ping\nsteps:\n  - id: a\n    kind: http\n    http: {url: \"https://example.com/\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, cmd[1:]...), "--addr", "127.0.0.1:0", "--workflows", workflows)
	serve := exec.Command(bin, append([]string{cmd[0]}, args...)...)
	serve.Env = append(os.Environ(), "ONCEFLOW_DB=sqlite://"+filepath.Join(t.TempDir(), "onceflow.db"), "ONCEFLOW_API_TOKENS=")
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "onceflow serving" {
				addr <- line.Addr
			}
		}
		close(addr)
	}()
	var base string
	select {
	case base = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start within 60 s")
	}
	if base == "" {
		t.Fatal("serve exited before serving")
	}
	resp, err := http.Get(base + "/v1/workflows")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized { // no tokens configured
		t.Fatalf("GET /v1/workflows: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}
