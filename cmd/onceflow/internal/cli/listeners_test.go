package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const ownListenersYAML = `name: fetch
run_key: "{input.id}"
steps:
  - id: get
    kind: http
    effect_key: "fetch:{input.id}"
    http: {method: GET, url: "{env.OWN_DEST}/{input.id}"}
`

// apiCall sends an API request to base with token and decodes the JSON answer.
func apiCall(t *testing.T, method, url, token, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// waitRunStep polls GET /v1/runs/{id} until its one step is no longer pending, processing
// or retrying, and returns it.
func waitRunStep(t *testing.T, base, token string, id float64) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, run := apiCall(t, "GET", fmt.Sprintf("%s/v1/runs/%d", base, int64(id)), token, "", "")
		steps, _ := run["steps"].([]any)
		if len(steps) == 1 {
			st := steps[0].(map[string]any)
			switch st["state"] {
			case "pending", "processing", "retrying":
			default:
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d did not finish: %v", int64(id), run)
		}
		time.Sleep(20 * time.Millisecond) // polling an API with a deadline
	}
}

// An http step never reaches the server's own listeners — the API, the web console and
// the metrics — although --allow-net opens loopback: a destination that redirects to
// them is refused at connect time, the step waits for review as destination_blocked, and
// nothing onceflow serves ends up in the attempt log a read token can see.
func TestStepsNeverReachTheServersOwnListeners(t *testing.T) {
	var targets atomic.Value // map[string]string: path → where to redirect
	targets.Store(map[string]string{})
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to, ok := targets.Load().(map[string]string)[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, to, http.StatusFound)
	}))
	defer dest.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fetch.yaml"), []byte(ownListenersYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	const admin = "admin-secret-0123456789"
	c := startCommand(t, []string{"OWN_DEST=" + dest.URL, "ONCEFLOW_API_TOKENS=ops:admin:" + admin},
		"serve", "--db", "sqlite://"+filepath.Join(t.TempDir(), "own.db"), "--workflows", dir, "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--ui-addr", "127.0.0.1:0", "--allow-net", "127.0.0.1/32", "--max-redirects", "2")
	base := c.waitLog("onceflow serving", 1)["addr"].(string)
	metricsURL := c.waitLog("serving metrics", 1)["addr"].(string)
	consoleURL := c.waitLog("serving the web console", 1)["addr"].(string)
	targets.Store(map[string]string{
		"/metrics": metricsURL,
		"/api":     base + "/v1/openapi.json",
		"/console": consoleURL + "login",
	})
	for _, path := range []string{"metrics", "api", "console"} {
		code, run := apiCall(t, "POST", base+"/v1/workflows/fetch/runs", admin, "own-"+path, `{"id": "`+path+`"}`)
		if code != http.StatusCreated {
			t.Fatalf("start %s: %d %v", path, code, run)
		}
		st := waitRunStep(t, base, admin, run["id"].(float64))
		b, _ := json.Marshal(st)
		short := string(b)
		if len(short) > 300 {
			short = short[:300] + "…"
		}
		if st["state"] != "needs_review" || st["reason"] != "destination_blocked" {
			t.Errorf("a redirect to the server's own %s: step %s (%s); want needs_review, destination_blocked: %s", path, st["state"], st["reason"], short)
		}
		for _, leak := range []string{"# HELP", "onceflow_", "openapi", "<html", "Sign in"} {
			if strings.Contains(string(b), leak) {
				t.Errorf("the step's record holds %q from the server's own %s: %s", leak, path, short)
			}
		}
		if !strings.Contains(string(b), "own listeners") {
			t.Errorf("the step's error does not say the destination is one of onceflow's own listeners: %s", short)
		}
	}
}

const fileLimitYAML = `name: call
run_key: "{input.id}"
steps:
  - id: post
    kind: http
    effect_key: "call:{input.id}"
    http: {url: "{env.LIMIT_DEST}/calls", body: {id: "{input.id}"}}
`

// A client that holds idle keep-alive connections up to the process's file limit (256
// here) no longer stops the server: the API still answers a new client — idle connections
// are closed to make room — and the engine can still open the connections its steps need.
func TestServeKeepsServingAtTheFileLimit(t *testing.T) {
	dest := newCountingDest(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "call.yaml"), []byte(fileLimitYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	const admin = "admin-secret-0123456789"
	c := startCommand(t, []string{"LIMIT_DEST=" + dest.URL, "ONCEFLOW_API_TOKENS=ops:admin:" + admin, "ONCEFLOW_TEST_NOFILE=256"},
		"serve", "--db", "sqlite://"+filepath.Join(t.TempDir(), "limit.db"), "--workflows", dir, "--addr", "127.0.0.1:0",
		"--allow-net", "127.0.0.1/32")
	base := c.waitLog("onceflow serving", 1)["addr"].(string)
	host := strings.TrimPrefix(base, "http://")
	// 300 connections, each after one GET /healthz, kept open: more than the file limit.
	for i := range 300 {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		go io.Copy(io.Discard, bufio.NewReader(conn)) // read whatever comes, until closed
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz with 300 connections held open: %v", err)
	}
	resp.Body.Close()
	code, run := apiCall(t, "POST", base+"/v1/workflows/call/runs", admin, "c1", `{"id": "c1"}`)
	if code != http.StatusCreated {
		t.Fatalf("start with 300 connections held open: %d %v", code, run)
	}
	if st := waitRunStep(t, base, admin, run["id"].(float64)); st["state"] != "completed" {
		b, _ := json.Marshal(st)
		t.Fatalf("the step with 300 connections held open: %s", b)
	}
	if n := dest.count("/calls"); n != 1 {
		t.Errorf("destination reached %d times, want 1", n)
	}
}
