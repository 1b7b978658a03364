package cli

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/steps/emailstep"
	"github.com/onceflow/onceflow/triggers/queue"
)

const examplesDir, envExample = "../../../../examples", "../../../../examples/.env.example"

// examples/.env.example names every variable the example files read — {env.NAME}, the
// settings ending in _env, what their step kinds and queue brokers read from the
// environment — and no other, besides onceflow's own ONCEFLOW_API_TOKENS.
func TestEnvExampleNamesWhatTheExamplesRead(t *testing.T) {
	vars, err := readEnvFile(envExample)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range vars {
		listed = append(listed, v.Name)
	}
	defs, err := fileReader().Load(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	kindEnv := map[string][]string{
		"email": {emailstep.EnvAddr, emailstep.EnvUsername, emailstep.EnvPassword, emailstep.EnvTLS},
		"nats":  {"ONCEFLOW_NATS_URL"},
		"amqp":  {"ONCEFLOW_AMQP_URL"},
	}
	read := map[string]bool{"ONCEFLOW_API_TOKENS": true}
	for _, d := range defs {
		for _, n := range d.EnvNames() {
			read[n] = true
		}
		for _, s := range d.Steps {
			for _, n := range kindEnv[s.Kind] {
				read[n] = true
			}
		}
		if cfg, ok := d.Trigger("queue"); ok {
			qs, ok := cfg.(*queue.Settings)
			if !ok {
				t.Fatalf("%s: the queue block's settings are a %T", d.File(), cfg)
			}
			for broker := range qs.Brokers {
				if kindEnv[broker] == nil {
					t.Fatalf("%s: queue broker %s: which variable holds its URL? Add it to this test and to .env.example", d.File(), broker)
				}
				for _, n := range kindEnv[broker] {
					read[n] = true
				}
			}
		}
	}
	var want []string
	for n := range read {
		want = append(want, n)
	}
	sort.Strings(want)
	sort.Strings(listed)
	if !slices.Equal(listed, want) {
		var missing, extra []string
		for _, n := range want {
			if !slices.Contains(listed, n) {
				missing = append(missing, n)
			}
		}
		for _, n := range listed {
			if !read[n] {
				extra = append(extra, n)
			}
		}
		t.Fatalf("examples/.env.example lacks %q and lists %q, which no example reads", missing, extra)
	}
}

// serve --env-file examples/.env.example serves the examples with nothing else set.
func TestServeExamplesFromTheEnvExample(t *testing.T) {
	vars, err := readEnvFile(envExample)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own environment may set some of them (the services of the tests): the
	// command gets none of those, only what the file says.
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(vars, func(v envVar) bool { return v.Name == name }) {
			env = append(env, kv)
		}
	}
	// Except the broker: the file's is the machine's default port, where the tests' shared
	// NATS may answer; an address of the environment wins over the file's.
	env = append(env, "ONCEFLOW_NATS_URL=nats://127.0.0.1:1")
	c := startCommandEnv(t, env, "serve", "--workflows", examplesDir, "--env-file", envExample, "--addr", "127.0.0.1:0",
		"--db", "sqlite://"+filepath.Join(t.TempDir(), "examples.db"), "--allow-net", "127.0.0.1/32")
	line := c.waitLog("onceflow serving", 1)
	wfs, _ := line["workflows"].([]any)
	if len(wfs) < 5 {
		t.Fatalf("serve --env-file served %v", line)
	}
}

// readEnvFile takes NAME=VALUE lines, "export", comments and both quotes, and refuses a
// malformed line with the file and line number, so that nothing of the file is used.
func TestReadEnvFile(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) string {
		t.Helper()
		p := filepath.Join(dir, "test.env")
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("# a comment\n\nA=plain value  \nexport B=2\nC='single # not a comment $HOME'\nD=\"dq \\\"x\\\" \\\\ \\n end\"\nE=\n F = spaced\nG=a=b\n")
	vars, err := readEnvFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Name] = v.Value
	}
	want := map[string]string{"A": "plain value", "B": "2", "C": "single # not a comment $HOME", "D": "dq \"x\" \\ \n end", "E": "", "F": "spaced", "G": "a=b"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("read %v", got)
	}
	for src, msg := range map[string]string{
		"A=1\nsk_live_pasted_secret\n":  ":2: the line is not NAME=VALUE (it has no =)",
		"A=1\nB=2\n1BAD=x\n":            `:3: "1BAD" is not a variable name`,
		"A=1\nMY VAR=x\n":               `:2: "MY VAR" is not a variable name`,
		"A=1\nB=2\nA=3\n":               ":3: A is set already on line 1",
		"A=\"open\n":                    ":1: A: the value opens a \" quote that does not close",
		"A='it's'\n":                    ":1: A: a '…' value cannot hold a '",
		"A=\"bad \\t escape\"\n":        `:1: A: \t is not an escape`,
		"A=\"in \" side\"\n":            `:1: A: a " inside a "…" value must be written \"`,
		"X=1\n\n# fine\nY=\"unclosed\n": ":4: Y: the value opens",
	} {
		_, err := readEnvFile(write(src))
		if err == nil || !strings.Contains(err.Error(), p+msg) {
			t.Errorf("%q: %v, want …%s", src, err, msg)
		}
		if err != nil && strings.Contains(err.Error(), "sk_live") {
			t.Errorf("the error quotes the line: %v", err)
		}
	}
}

// A malformed file stops serve before it starts, naming the line, with exit status 2, and
// sets nothing: a variable of a line before the bad one stays unset.
func TestServeRefusesAMalformedEnvFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.env")
	if err := os.WriteFile(p, []byte("ONCEFLOW_TEST_ENVFILE_FIRST=1\nnot a line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"serve", "worker"} {
		r := run(t, cmd, "--env-file", p, "--workflows", examplesDir, "--db", "sqlite://"+filepath.Join(t.TempDir(), "x.db"))
		if r.code != exitUsage || !strings.Contains(r.stderr, p+":2: the line is not NAME=VALUE") {
			t.Fatalf("%s with a malformed --env-file: exit %d\n%s", cmd, r.code, r.stderr)
		}
		if _, set := os.LookupEnv("ONCEFLOW_TEST_ENVFILE_FIRST"); set {
			t.Fatalf("%s set a variable of a file it refused", cmd)
		}
	}
	r := run(t, "serve", "--env-file", filepath.Join(t.TempDir(), "missing.env"), "--workflows", examplesDir)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--env-file") {
		t.Fatalf("serve with a missing --env-file: exit %d\n%s", r.code, r.stderr)
	}
}

// A variable set in the environment keeps its value over the file's; ONCEFLOW_DB from the
// file is the database unless --db was given.
func TestApplyEnvFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "app.env")
	if err := os.WriteFile(p, []byte("ONCEFLOW_TEST_ENVFILE_KEPT=from-file\nONCEFLOW_TEST_ENVFILE_NEW=from-file\nONCEFLOW_DB=sqlite:///tmp/from-file.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ONCEFLOW_TEST_ENVFILE_KEPT", "from-env")
	t.Setenv("ONCEFLOW_DB", "") // restored when the test ends
	os.Unsetenv("ONCEFLOW_DB")
	t.Cleanup(func() { os.Unsetenv("ONCEFLOW_TEST_ENVFILE_NEW") })
	for _, given := range []bool{false, true} {
		os.Unsetenv("ONCEFLOW_DB")
		os.Unsetenv("ONCEFLOW_TEST_ENVFILE_NEW")
		g := &globals{db: defaultDB}
		cmd := &cobra.Command{}
		cmd.Flags().StringVar(&g.db, "db", defaultDB, "")
		if given {
			if err := cmd.Flags().Set("db", "sqlite:///tmp/given.db"); err != nil {
				t.Fatal(err)
			}
		}
		set, err := g.applyEnvFile(cmd, p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(set, []string{"ONCEFLOW_TEST_ENVFILE_NEW", "ONCEFLOW_DB"}) || os.Getenv("ONCEFLOW_TEST_ENVFILE_KEPT") != "from-env" ||
			os.Getenv("ONCEFLOW_TEST_ENVFILE_NEW") != "from-file" {
			t.Fatalf("set %v; KEPT=%q NEW=%q", set, os.Getenv("ONCEFLOW_TEST_ENVFILE_KEPT"), os.Getenv("ONCEFLOW_TEST_ENVFILE_NEW"))
		}
		if want := map[bool]string{false: "sqlite:///tmp/from-file.db", true: "sqlite:///tmp/given.db"}[given]; g.db != want {
			t.Errorf("--db given %v: the database is %s, want %s", given, g.db, want)
		}
	}
}
