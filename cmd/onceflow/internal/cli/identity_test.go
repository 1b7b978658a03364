package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// onceflow schema prints the committed JSON Schema of workflow files.
func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	r := runOK(t, "schema")
	committed, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "flowfile", "workflow.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != string(committed) {
		t.Fatal("onceflow schema printed something else than flowfile/workflow.schema.json")
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Fatalf("not a 2020-12 JSON Schema: %v %v", err, doc["$schema"])
	}
}

// A binary installed with `go install …@v1.4.0` reports the module version and the
// revision it was built from.
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/onceflow/onceflow", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "4f1c2d9e"}, {Key: "vcs.modified", Value: "false"}}}
	if v, rev := versionOf(info, true); v != "v1.4.0" || rev != "4f1c2d9e" {
		t.Fatalf("version %q, revision %q", v, rev)
	}
	info.Main.Version, info.Settings[1].Value = "(devel)", "true"
	if v, rev := versionOf(info, true); v != "dev" || rev != "4f1c2d9e (modified)" {
		t.Fatalf("a local build: version %q, revision %q", v, rev)
	}
}

// A built binary prints the module version and revision its own build info holds, as the
// Go tool reads them from the file.
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := filepath.Join(t.TempDir(), "onceflow")
	build := exec.Command("go", "build", "-o", bin, "github.com/onceflow/onceflow/cmd/onceflow")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	field := func(re string) string {
		if m := regexp.MustCompile(re).FindSubmatch(meta); m != nil {
			return string(m[1])
		}
		return ""
	}
	modVersion := field(`(?m)^\tmod\tgithub.com/onceflow/onceflow\t(\S+)`)
	revision := field(`(?m)^\tbuild\tvcs\.revision=(\S+)`)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantVersion := modVersion
	if modVersion == "" || modVersion == "(devel)" {
		wantVersion = "dev"
	}
	if !strings.HasPrefix(string(out), "onceflow "+wantVersion+"\n") {
		t.Fatalf("version printed %q; the build info says module version %q", out, modVersion)
	}
	if revision != "" && !strings.Contains(string(out), "revision  "+revision) {
		t.Fatalf("version printed %q; the build info says revision %s", out, revision)
	}
	if revision == "" && strings.Contains(string(out), "revision") {
		t.Fatalf("version printed a revision the build info lacks: %q", out)
	}
}

// onceflow completion bash|zsh|fish prints each shell's script, and the scripts' callback
// completes subcommands and flags.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "__start_onceflow", "zsh": "#compdef onceflow", "fish": "complete -c onceflow"} {
		r := runOK(t, "completion", shell)
		if !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s lacks %q:\n%.300s", shell, want, r.stdout)
		}
	}
	r := runOK(t, "__complete", "s")
	if !strings.Contains(r.stdout, "serve\t") || !strings.Contains(r.stdout, "schema\t") {
		t.Errorf("completing 's': %q", r.stdout)
	}
	r = runOK(t, "__complete", "serve", "--work")
	if !strings.Contains(r.stdout, "--workers") || !strings.Contains(r.stdout, "--workflows") {
		t.Errorf("completing 'serve --work': %q", r.stdout)
	}
}

// `go install github.com/onceflow/onceflow/cmd/onceflow@latest` needs a go.mod without
// replace or exclude directives, and the README names the Go release go.mod asks for.
func TestInstallableAndGoVersionDocumented(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "replace" || f[0] == "exclude") {
			t.Errorf("go.mod has %q: go install …@latest refuses a module with replace or exclude directives", line)
		}
	}
	m := regexp.MustCompile(`(?m)^go (1\.\d+)(\.\d+)?$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("Go "+string(m[1])+" or later")) {
		t.Errorf("README.md does not say Go %s or later, as go.mod's go line asks", m[1])
	}
	if !bytes.Contains(readme, []byte("go install github.com/onceflow/onceflow/cmd/onceflow@latest")) {
		t.Error("README.md does not show go install …@latest")
	}
	if !regexp.MustCompile(`(?m)^module github.com/onceflow/onceflow$`).Match(mod) {
		t.Error("the module path is not github.com/onceflow/onceflow")
	}
}
