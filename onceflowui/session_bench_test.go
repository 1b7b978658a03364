package onceflowui_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store/sqlite"
)

// BenchmarkSignedInPage is one request of a signed-in person for a small page (the effect
// key form) over a real HTTP connection, on a SQLite file: what reading the session (and
// now and then recording its last request) costs each page.
func BenchmarkSignedInPage(b *testing.B) {
	st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	client, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	toks, err := onceflowhttp.ParseTokens("ops:admin:" + adminSecret)
	if err != nil {
		b.Fatal(err)
	}
	c, err := onceflowui.New(onceflowui.Config{Client: client, Tokens: toks})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(c)
	b.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) string {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body)
	}
	page := get("/ui/login")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.Fatal("no CSRF field on the sign-in page")
	}
	resp, err := hc.PostForm(srv.URL+"/ui/login", url.Values{"csrf": {m[1]}, "token": {adminSecret}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("sign-in: %v %v", resp, err)
	}
	resp.Body.Close()
	b.ResetTimer()
	for b.Loop() {
		resp, err := hc.Get(srv.URL + "/ui/keys")
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET /ui/keys: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
