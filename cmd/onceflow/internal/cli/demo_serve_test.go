package cli

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// demo --serve keeps onceflow and its console running after the scenario: it prints the
// console's URL and a sign-in token, the console answers and takes the token, and Ctrl-C
// (SIGINT) stops it with exit status 0.
func TestDemoServe(t *testing.T) {
	c := startCommand(t, nil, "demo", "--serve", "--json", "--forms", "4", "--orders", "3",
		"--db", "sqlite://"+filepath.Join(t.TempDir(), "demo.db"))
	consoleURL := strings.TrimPrefix(c.waitLogPrefix("console: ")["msg"].(string), "console: ")
	token := strings.TrimPrefix(c.waitLogPrefix("sign-in token: ")["msg"].(string), "sign-in token: ")
	if !strings.HasPrefix(consoleURL, "http://127.0.0.1:") || !strings.HasSuffix(consoleURL, "/ui/") || !strings.HasPrefix(token, "adm_") {
		t.Fatalf("demo --serve printed console %q and token %q", consoleURL, token)
	}

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := browser.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, page := get(consoleURL + "login")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("the console's sign-in page: %d\n%s", code, page)
	}
	resp, err := browser.PostForm(consoleURL+"login", url.Values{"csrf": {m[1]}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, page = get(consoleURL + "runs")
	if code != http.StatusOK || !regexp.MustCompile(`<a href="/ui/runs/[0-9]+">`).MatchString(page) {
		t.Fatalf("the console's runs after signing in with the printed token: %d\n%s", code, page)
	}

	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-c.done
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("demo --serve after SIGINT: %v, want exit status 0", err)
	}
}

// waitLogPrefix waits for a line of the command's standard error that starts with prefix.
func (c *command) waitLogPrefix(prefix string) map[string]any {
	c.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		for _, l := range c.lines {
			if msg, _ := l["msg"].(string); strings.HasPrefix(msg, prefix) {
				c.mu.Unlock()
				return l
			}
		}
		c.mu.Unlock()
		select {
		case <-c.more:
		case <-c.done:
			c.t.Fatalf("the command ended before printing %q:\n%v", prefix, c.lines)
		case <-deadline:
			c.t.Fatalf("no line %q after 60s:\n%v", prefix, c.lines)
		}
	}
}
