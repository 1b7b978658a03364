package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// `onceflow serve` serves /metrics on its API address, and `onceflow worker` on
// --metrics-addr; a bad --redact-fields is a usage error.
func TestMetricsEndpoints(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte("name: w\nredact: [email]\nsteps:\n  - id: a\n    kind: http\n    http: {url: \"http://127.0.0.1:1/\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := "sqlite://" + filepath.Join(t.TempDir(), "onceflow.db")
	runOK(t, "migrate", "--db", db)
	for _, tc := range []struct {
		name string
		args func(addr string) []string
	}{
		{"serve", func(addr string) []string { return []string{"serve", "--addr", addr} }},
		{"worker", func(addr string) []string { return []string{"worker", "--metrics-addr", addr} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			exit := make(chan result, 1)
			go func() {
				var out, errOut strings.Builder
				args := append(tc.args(addr), "--workflows", dir, "--db", db, "--log-level", "error", "--redact-fields", "phone,customer.name")
				code := execute(ctx, args, &out, &errOut, apiMiddleware)
				exit <- result{stdout: out.String(), stderr: errOut.String(), code: code}
			}()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(30 * time.Second)
			var body string
			for body == "" {
				if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						body = string(b)
						break
					}
				}
				select {
				case <-tick.C:
				case <-deadline:
					t.Fatal("no /metrics after 30 s")
				case r := <-exit:
					t.Fatalf("%s exited early: %d %s", tc.name, r.code, r.stderr)
				}
			}
			for _, want := range []string{"onceflow_store_stats_errors_total 0", "onceflow_leases_reaped_total 0", "go_goroutines"} {
				if !strings.Contains(body, want) {
					t.Errorf("/metrics lacks %q:\n%s", want, body)
				}
			}
			cancel()
			if r := <-exit; r.code != exitOK {
				t.Fatalf("%s: exit %d %s", tc.name, r.code, r.stderr)
			}
		})
	}
	if r := run(t, "worker", "--workflows", dir, "--db", db, "--redact-fields", "customer..name"); r.code != exitUsage || !strings.Contains(r.stderr, "customer..name") {
		t.Errorf("bad --redact-fields: exit %d %s", r.code, r.stderr)
	}
}
