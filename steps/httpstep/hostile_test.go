package httpstep

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
)

func inputCtx(input string) *onceflow.StepContext {
	sc := stepCtx("")
	sc.Input = json.RawMessage(input)
	return sc
}

// Template values are encoded for the part of the URL they land in: a value cannot climb
// the path, add a query parameter or cut the path with a fragment. {+field} splices.
func TestURLTemplateValuesAreEncoded(t *testing.T) {
	var mu sync.Mutex
	var got []string
	_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.WriteHeader(200)
	})
	s := newStep(t, Spec{Request: Request{Method: "GET", URL: "{env.BASE}/echo/{input.p}?q={input.q}&fixed=1"}}, map[string]string{"BASE": srv.URL})
	for _, in := range []string{
		`{"p": "../admin", "q": "a&admin=1"}`,
		`{"p": "x?admin=1", "q": "b#frag"}`,
		`{"p": "x#f", "q": "c"}`,
		`{"p": "..", "q": "d"}`,
	} {
		if _, err := s.Do(context.Background(), inputCtx(in)); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
	}
	raw := newStep(t, Spec{Request: Request{Method: "GET", URL: "{env.BASE}/echo/{+input.p}"}}, map[string]string{"BASE": srv.URL})
	if _, err := raw.Do(context.Background(), inputCtx(`{"p": "a/b?c=1"}`)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/echo/..%2Fadmin?q=a%26admin%3D1&fixed=1",
		"/echo/x%3Fadmin=1?q=b%23frag&fixed=1",
		"/echo/x%23f?q=c&fixed=1",
		"/echo/%2E%2E?q=d&fixed=1",
		"/echo/a/b?c=1",
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A header value with a line break or NUL is refused before anything is sent, as a
// permanent error: a retry would fail the same way.
func TestControlCharactersInHeadersArePermanent(t *testing.T) {
	rec, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	s := newStep(t, Spec{Request: Request{URL: srv.URL, Headers: map[string]string{"X-Name": "{input.name}"}}}, nil)
	for _, in := range []string{`{"name": "a\r\nX-Admin: 1"}`, `{"name": "a\u0000b"}`, `{"name": "a\nb"}`} {
		_, err := s.Do(context.Background(), inputCtx(in))
		var se *onceflow.StepError
		if !errors.As(err, &se) || se.Class != onceflow.Permanent {
			t.Fatalf("%s: error %#v, want permanent", in, err)
		}
	}
	if len(rec.requests) != 0 {
		t.Fatalf("%d requests sent", len(rec.requests))
	}
}

func TestHeaderNamesMustBeTokens(t *testing.T) {
	for _, name := range []string{"Bad Header", "X-A:b", "", "X\r\nY"} {
		_, err := New(Spec{Request: Request{URL: "https://example.com", Headers: map[string]string{name: "v"}}}, http.DefaultClient, env(nil))
		if err == nil || !strings.Contains(err.Error(), "header name") {
			t.Errorf("header %q: %v", name, err)
		}
	}
}

// A redirect to file: is refused and classed permanent: it would fail the same way again.
func TestRedirectToFileIsPermanent(t *testing.T) {
	rec, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "file:///etc/passwd")
		w.WriteHeader(http.StatusFound)
	})
	p := &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, MaxRedirects: 3}
	s, err := New(Spec{Request: Request{URL: srv.URL}}, p.Client(5*time.Second), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Do(context.Background(), stepCtx(""))
	var se *onceflow.StepError
	if !errors.As(err, &se) || se.Class != onceflow.Permanent || !strings.Contains(err.Error(), "file") {
		t.Fatalf("error %v, want permanent", err)
	}
	if len(rec.requests) != 1 {
		t.Fatalf("%d requests", len(rec.requests))
	}
}

// A header built from the environment does not follow a redirect to another host.
func TestSecretHeaderIsNotForwardedToAnotherHost(t *testing.T) {
	var mu sync.Mutex
	var landed http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		landed = r.Header.Clone()
		mu.Unlock()
		io.WriteString(w, `{}`)
	}))
	defer other.Close()
	_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/x", http.StatusTemporaryRedirect)
	})
	p := &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}, MaxRedirects: 2}
	s, err := New(Spec{Request: Request{URL: srv.URL, Headers: map[string]string{
		"X-Api-Key": "{env.DEST_TOKEN}", "Authorization": "Bearer {env.DEST_TOKEN}", "X-Run": "{run.key}",
	}}}, p.Client(5*time.Second), env(map[string]string{"DEST_TOKEN": "dest-token-0123456789"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do(context.Background(), stepCtx("")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if landed == nil {
		t.Fatal("the redirect was not followed")
	}
	if landed.Get("X-Api-Key") != "" || landed.Get("Authorization") != "" || landed.Get("X-Run") != "form-8812" {
		t.Fatalf("the other host received %v", landed)
	}
}
