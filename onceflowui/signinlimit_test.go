package onceflowui_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
)

// Failed sign-ins are limited per client address: past the allowance every sign-in from
// the address, even with a good token, is answered 429 with Retry-After, until it has
// waited; another address is not held back. Each failure is logged at warn level with the
// address and without the token.
func TestSignInRateLimit(t *testing.T) {
	b := setup(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	var logs strings.Builder
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	toks, err := onceflowhttp.ParseTokens("ops:admin:" + adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	console := newConsole(t, onceflowui.Config{Client: b.client, Tokens: toks, Now: clock, Logger: log,
		SignInFailures: 3, SignInWindow: 3 * time.Minute})
	srv := httptest.NewServer(console)
	t.Cleanup(srv.Close)
	br := b.browser()
	br.base = srv.URL

	const wrong = "wrong-token-guess-000000"
	for i := range 3 {
		if resp := br.signIn(wrong); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d = %d, want 401", i+1, resp.StatusCode)
		}
	}
	for _, secret := range []string{wrong, adminSecret} {
		resp := br.signIn(secret)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
			t.Fatalf("a sign-in past the limit = %d with Retry-After %q, want 429 and 60", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}

	// Another address signs in.
	other := func(method, path string, form url.Values, cookies []*http.Cookie) *http.Response {
		var req *http.Request
		if form != nil {
			req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			req = httptest.NewRequest(method, path, nil)
		}
		req.RemoteAddr = "192.0.2.9:41000"
		for _, c := range cookies {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		console.ServeHTTP(rec, req)
		return rec.Result()
	}
	page := other(http.MethodGet, "/ui/login", nil, nil)
	form, _ := io.ReadAll(page.Body)
	resp := other(http.MethodPost, "/ui/login", url.Values{"csrf": {csrfOf(t, string(form))}, "token": {adminSecret}}, page.Cookies())
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a sign-in from another address = %d, want 303", resp.StatusCode)
	}

	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if resp := br.signIn(adminSecret); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a sign-in after waiting = %d, want 303", resp.StatusCode)
	}

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if got := strings.Count(out, `"level":"WARN","msg":"console sign-in refused: unknown token","client":"127.0.0.1"`); got != 3 {
		t.Errorf("%d warnings of failed sign-ins naming the address, want 3:\n%s", got, out)
	}
	if !strings.Contains(out, `"msg":"console sign-in refused: too many failed sign-ins from this address","client":"127.0.0.1"`) {
		t.Errorf("no warning of the refusal:\n%s", out)
	}
	for _, secret := range []string{wrong, adminSecret} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds a token:\n%s", out)
		}
	}
}

// After a token sign-in the browser goes to the next page only when it is one of the
// console's: not another host, nor a path that dot segments lead out of the console.
func TestSignInNextStaysInTheConsole(t *testing.T) {
	b := setup(t)
	for next, want := range map[string]string{"/ui/review?reason=x": "/ui/review?reason=x", "https://evil.example/": "/ui/",
		"//evil.example/ui/": "/ui/", "/ui/../../evil": "/ui/", "/ui/%2e%2e/evil": "/ui/", "/\\evil.example": "/ui/"} {
		br := b.browser()
		_, page := br.get("/ui/login")
		resp, body := br.post("/ui/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {readSecret}, "next": {next}})
		wantStatus(t, resp, body, http.StatusSeeOther)
		if loc := resp.Header.Get("Location"); loc != want {
			t.Errorf("next %q: sent to %q, want %q", next, loc, want)
		}
	}
}
