package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/server"
)

// command is the onceflow command running as a process of its own (this test binary in
// the mode TestMain gives it), with its log lines collected. Its API checks every exchange
// against the OpenAPI document, and a mismatch it logs fails the test.
type command struct {
	t     *testing.T
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []map[string]any
	more  chan struct{} // a line arrived
	done  chan struct{}
}

func startCommand(t *testing.T, env []string, args ...string) *command {
	t.Helper()
	return startCommandEnv(t, append(os.Environ(), env...), args...)
}

// startCommandEnv is startCommand with env as the whole environment.
func startCommandEnv(t *testing.T, env []string, args ...string) *command {
	t.Helper()
	b, _ := json.Marshal(args)
	c := &command{t: t, more: make(chan struct{}, 1), done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(env, "ONCEFLOW_TEST_COMMAND="+string(b))
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"msg": sc.Text()}
			}
			c.mu.Lock()
			c.lines = append(c.lines, m)
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		<-c.done
		_ = c.cmd.Wait()
		for _, l := range c.lines {
			if l["msg"] == apiMismatch {
				t.Errorf("onceflow %s: %s: %v", strings.Join(args, " "), apiMismatch, l["error"])
			}
		}
	})
	return c
}

// waitLog waits for the n-th (1-based) log line whose msg is msg and returns it.
func (c *command) waitLog(msg string, n int) map[string]any {
	c.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		seen := 0
		for _, l := range c.lines {
			if l["msg"] == msg {
				if seen++; seen == n {
					c.mu.Unlock()
					return l
				}
			}
		}
		c.mu.Unlock()
		select {
		case <-c.more:
		case <-c.done:
			c.t.Fatalf("the command ended before logging %q:\n%v", msg, c.lines)
		case <-deadline:
			c.t.Fatalf("no log line %q after 30s:\n%v", msg, c.lines)
		}
	}
}

const reloadWorkflow = `name: %s
run_key: "{input.id}"
steps:
  - id: call
    kind: http
    effect_key: "%s:{input.id}"
    http: {url: "{env.RELOAD_DEST}/%s", body: {id: "{input.id}"}}
`

func workflowFile(name string) string {
	return strings.ReplaceAll(reloadWorkflow, "%s", name)
}

// serve --workflows DIR reloads its files on SIGHUP and on POST /v1/admin/reload: a valid
// set replaces the running definitions; a bad file keeps them running, says why in the log
// and in the API's answer, and leaves nothing half-loaded.
func TestReloadOnHangupAndAPI(t *testing.T) {
	dest := newCountingDest(t)

	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", workflowFile("a"))
	const admin, ingest = "admin-secret-0123456789", "ingest-secret-0123456789"
	c := startCommand(t, []string{"RELOAD_DEST=" + dest.URL, "ONCEFLOW_API_TOKENS=ops:admin:" + admin + ",site:ingest:" + ingest},
		"serve", "--db", "sqlite://"+filepath.Join(t.TempDir(), "r.db"), "--workflows", dir, "--addr", "127.0.0.1:0",
		"--allow-net", "127.0.0.1/32")
	base := c.waitLog("onceflow serving", 1)["addr"].(string)

	call := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if strings.HasSuffix(path, "/runs") {
			req.Header.Set("Idempotency-Key", "key-"+body)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	start := func(workflow, id string) int {
		code, _ := call("POST", "/v1/workflows/"+workflow+"/runs", ingest, `{"id": "`+id+`"}`)
		return code
	}
	if code := start("a", "1"); code != http.StatusCreated {
		t.Fatalf("start a: %d", code)
	}
	if code := start("b", "1"); code != http.StatusNotFound {
		t.Fatalf("start b before it exists: %d", code)
	}

	// SIGHUP with a new valid file: b is served and its steps run.
	write("b.yaml", workflowFile("b"))
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	l := c.waitLog("SIGHUP: workflows reloaded", 1)
	if added, _ := l["added"].([]any); len(added) != 1 || added[0] != "b" {
		t.Errorf("reload log line: %v", l)
	}
	if code := start("b", "1"); code != http.StatusCreated {
		t.Fatalf("start b after SIGHUP: %d", code)
	}

	// SIGHUP with a broken file and a broken change to b: nothing changes, the log says why.
	write("c.yaml", "name: c\nsteps:\n  - id: call\n    kind: http\n    effect_key: \"c:{input.id}\"\n    timeout: soon\n")
	write("b.yaml", workflowFile("b")+"    needs: [zz]\n")
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	l = c.waitLog("SIGHUP: workflows not reloaded; the definitions loaded before keep running", 1)
	problems, _ := l["problems"].([]any)
	joined := ""
	for _, p := range problems {
		joined += p.(string) + "\n"
	}
	if l["level"] != "ERROR" || !strings.Contains(joined, filepath.Join(dir, "c.yaml")+`:6:14: "soon" is not a duration`) {
		t.Errorf("refused reload log line: %v", l)
	}
	if code := start("b", "2"); code != http.StatusCreated {
		t.Fatalf("b stopped working after a refused reload: %d", code)
	}
	if code := start("c", "1"); code != http.StatusNotFound {
		t.Fatalf("the broken c was served: %d", code)
	}

	// The API answers the same, with every problem; only an admin token may ask.
	if code, _ := call("POST", "/v1/admin/reload", ingest, ""); code != http.StatusForbidden {
		t.Errorf("reload with an ingest token: %d", code)
	}
	code, body := call("POST", "/v1/admin/reload", admin, "")
	ps, _ := body["problems"].([]any)
	if code != http.StatusUnprocessableEntity || len(ps) < 2 {
		t.Fatalf("reload of bad files: %d %v", code, body)
	}
	first := ps[0].(map[string]any)
	if !strings.HasSuffix(first["file"].(string), "b.yaml") || first["line"] != float64(8) || !strings.Contains(first["message"].(string), `needs "zz"`) {
		t.Errorf("problem = %v", first)
	}

	// Fixed: the API reloads and says what changed.
	write("b.yaml", workflowFile("b"))
	write("c.yaml", workflowFile("c"))
	code, body = call("POST", "/v1/admin/reload", admin, "")
	if code != http.StatusOK || len(body["added"].([]any)) != 1 || body["added"].([]any)[0] != "c" || len(body["workflows"].([]any)) != 3 {
		t.Fatalf("reload of fixed files: %d %v", code, body)
	}
	if code := start("c", "1"); code != http.StatusCreated {
		t.Fatalf("start c after the API reload: %d", code)
	}
	// A schedule added by a reload fires, although the process started without one.
	write("d.yaml", `name: d
schedule: {cron: "* * * * * *", timezone: UTC, catch_up: none}
steps:
  - id: call
    kind: http
    effect_key: "d:{run.key}"
    http: {url: "{env.RELOAD_DEST}/d", body: {at: "{input.schedule.time}"}}
`)
	if code, body := call("POST", "/v1/admin/reload", admin, ""); code != http.StatusOK {
		t.Fatalf("reload with a schedule: %d %v", code, body)
	}
	// Every run's step reached the destination once.
	waitFor(t, "destination hits a:1 b:2 c:1 and the schedule's", func() bool {
		return dest.count("/a") == 1 && dest.count("/b") == 2 && dest.count("/c") == 1 && dest.count("/d") >= 1
	})
}

// What is masked of the environment is set at start: a reload may neither read a new
// variable nor make secret one that was shown until then; the files as they were reload.
func TestReloadKeepsTheMasks(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "crm.yaml", workflowFile("crm"))
	st := openSQLite(t, filepath.Join(t.TempDir(), "onceflow.db"))
	defer st.Close()
	env := map[string]string{"RELOAD_DEST": "http://127.0.0.1:9", "OTHER_DEST": "http://127.0.0.1:9"}
	a, err := server.New(context.Background(), server.Config{Store: st, Workflows: []string{dir}, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, tc := range []struct{ yaml, want string }{
		{"secrets: [RELOAD_DEST]\n" + workflowFile("crm"), "makes the environment variable RELOAD_DEST secret"},
		{strings.ReplaceAll(workflowFile("crm"), "RELOAD_DEST", "OTHER_DEST"), "reads the environment variable OTHER_DEST"},
	} {
		if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reload: %v, want it refused saying %q", err, tc.want)
		}
	}
	if err := os.WriteFile(file, []byte(workflowFile("crm")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reload(context.Background()); err != nil {
		t.Fatalf("reload of the files as they were: %v", err)
	}
}

// A reload that is refused, whatever refuses it, changes nothing and the server keeps
// serving what it served: a file nested deeper than the YAML parser can afford (which
// used to take the server's memory), a file too large to read, and a set of files that
// only the engine refuses (a workflow named as a schedule's fan-out) and that declares a
// limit — afterwards the limit can still be declared otherwise, as it never took effect.
func TestRefusedReloadChangesNothing(t *testing.T) {
	dest := newCountingDest(t)
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", workflowFile("a"))
	const admin, ingest = "admin-secret-0123456789", "ingest-secret-0123456789"
	c := startCommand(t, []string{"RELOAD_DEST=" + dest.URL, "ONCEFLOW_API_TOKENS=ops:admin:" + admin + ",site:ingest:" + ingest},
		"serve", "--db", "sqlite://"+filepath.Join(t.TempDir(), "r.db"), "--workflows", dir, "--addr", "127.0.0.1:0",
		"--allow-net", "127.0.0.1/32")
	base := c.waitLog("onceflow serving", 1)["addr"].(string)
	call := func(method, path, token, key, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err) // the server went away
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	served := func() []string {
		t.Helper()
		code, body := call("GET", "/v1/workflows", ingest, "", "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/workflows: %d %v", code, body)
		}
		var names []string
		for _, w := range body["workflows"].([]any) {
			names = append(names, w.(map[string]any)["name"].(string))
		}
		return names
	}
	starts := 0
	refused := func(what string, wantFile, wantMessage string, wantLine bool) {
		t.Helper()
		code, body := call("POST", "/v1/admin/reload", admin, "", "")
		ps, _ := body["problems"].([]any)
		if code != http.StatusUnprocessableEntity || len(ps) == 0 {
			t.Fatalf("%s: reload answered %d %v, want 422 with problems", what, code, body)
		}
		found := false
		for _, p := range ps {
			p := p.(map[string]any)
			line, _ := p["line"].(float64)
			if strings.HasSuffix(p["file"].(string), wantFile) && strings.Contains(p["message"].(string), wantMessage) && (!wantLine || line > 0) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: problems %v, want one in %s saying %q", what, ps, wantFile, wantMessage)
		}
		if got := served(); len(got) != 1 || got[0] != "a" {
			t.Errorf("%s: served workflows %v after the refused reload, want [a]", what, got)
		}
		starts++
		id := strconv.Itoa(starts)
		if code, body := call("POST", "/v1/workflows/a/runs", ingest, "key-"+id, `{"id": "`+id+`"}`); code != http.StatusCreated {
			t.Fatalf("%s: start a after the refused reload: %d %v", what, code, body)
		}
		waitFor(t, what+": the run's step reached the destination", func() bool { return dest.count("/a") == starts })
	}

	// 20 KB of nested lists: 357 MB to parse before the bound; refused at its line.
	deep := workflowFile("deep") + "      extra: " + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000) + "\n"
	writeFile(t, dir, "deep.yaml", strings.Replace(deep, "    http: {url: \"{env.RELOAD_DEST}/deep\", body: {id: \"{input.id}\"}}\n",
		"    http:\n      url: \"{env.RELOAD_DEST}/deep\"\n      body:\n        id: \"{input.id}\"\n", 1))
	refused("a deeply nested file", "deep.yaml", "nest more than 64 levels deep", true)
	if err := os.Remove(filepath.Join(dir, "deep.yaml")); err != nil {
		t.Fatal(err)
	}

	writeFile(t, dir, "big.yaml", workflowFile("big")+strings.Repeat("# padding padding padding padding padding padding\n", 6000))
	refused("a file of 300 KB", "big.yaml", "more than 262144 bytes", false)
	if err := os.Remove(filepath.Join(dir, "big.yaml")); err != nil {
		t.Fatal(err)
	}

	// Files that every check of the files accepts and the engine refuses.
	const schedule = `name: inv
schedule:
  cron: "0 9 1 * *"
  timezone: UTC
  run_key: "inv:{item.id}:{schedule.period}"
  for_each: {url: "{env.RELOAD_DEST}/list", items: data}
steps:
  - id: call
    kind: http
    effect_key: "inv:{input.item.id}:{input.schedule.period}"
    http: {url: "{env.RELOAD_DEST}/inv", body: {id: "{input.item.id}"}}
`
	writeFile(t, dir, "inv.yaml", schedule)
	limited := func(n int) string {
		return "limits:\n  - {host: \"" + strings.TrimPrefix(dest.URL, "http://") + "\", concurrency: " + strconv.Itoa(n) + "}\n"
	}
	writeFile(t, dir, "clash.yaml", strings.Replace(workflowFile("clash"), "name: clash\n", "name: inv.for-each\n"+limited(1), 1))
	refused("a workflow named as a schedule's fan-out", "", "fan-out workflow", false)
	if err := os.Remove(filepath.Join(dir, "clash.yaml")); err != nil {
		t.Fatal(err)
	}

	// Fixed, and with the limit declared otherwise: the refused reloads left nothing behind.
	writeFile(t, dir, "b.yaml", limited(2)+workflowFile("b"))
	code, body := call("POST", "/v1/admin/reload", admin, "", "")
	if code != http.StatusOK {
		t.Fatalf("reload of the fixed files: %d %v", code, body)
	}
	if got := served(); !slices.Contains(got, "b") || !slices.Contains(got, "inv") {
		t.Fatalf("served workflows %v, want b and inv among them", got)
	}
}
