package egress

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// IPv4-compatible IPv6 addresses embed an IPv4 address that some stacks still reach.
func TestIPv4CompatibleIPv6IsBlocked(t *testing.T) {
	p := &Policy{}
	for _, a := range []string{"::127.0.0.1", "::10.0.0.1", "::169.254.169.254", "::8.8.8.8"} {
		if err := p.Check("", netip.MustParseAddr(a)); !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: %v, want blocked", a, err)
		}
	}
	if _, err := p.Client(5 * time.Second).Get("http://[::127.0.0.1]:9/"); !errors.Is(err, ErrBlocked) {
		t.Errorf("GET [::127.0.0.1]: %v, want blocked", err)
	}
}

// A refusal names the address and the flag that opens it.
func TestBlockedErrorNamesTheFix(t *testing.T) {
	err := (&Policy{}).Check("crm.internal", netip.MustParseAddr("127.0.0.1"))
	for _, want := range []string{"crm.internal (127.0.0.1)", "loopback", "--allow-net 127.0.0.1/32"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if err := (&Policy{}).Check("", netip.MustParseAddr("::1")); err == nil || !strings.Contains(err.Error(), "--allow-net ::1/128") {
		t.Errorf("error %v", err)
	}
}

// On a redirect to another origin, headers marked secret are not sent there; on the same
// origin they are.
func TestCrossOriginRedirectDropsSecretHeaders(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // path → X-Api-Key received
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got["other"+r.URL.Path] = r.Header.Get("X-Api-Key") + "|" + r.Header.Get("X-Trace")
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer other.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = r.Header.Get("X-Api-Key") + "|" + r.Header.Get("X-Trace")
		mu.Unlock()
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/landed", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/landed", http.StatusTemporaryRedirect)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer first.Close()
	p := loopbackOnly()
	p.MaxRedirects = 2
	c := p.Client(5 * time.Second)
	for _, path := range []string{"/away", "/here"} {
		req, _ := http.NewRequestWithContext(WithSecretHeaders(context.Background(), "X-Api-Key"), "GET", first.URL+path, nil)
		req.Header.Set("X-Api-Key", "dest-token-secret")
		req.Header.Set("X-Trace", "t1")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if got["other/landed"] != "|t1" {
		t.Errorf("the other origin received %q, want no X-Api-Key", got["other/landed"])
	}
	if got["/landed"] != "dest-token-secret|t1" {
		t.Errorf("the same origin received %q, want the header kept", got["/landed"])
	}
}

// A redirect to file: (or any scheme but http and https) is refused, not attempted.
func TestRedirectToOtherSchemeIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "file:///etc/passwd")
		w.WriteHeader(http.StatusFound)
	}))
	defer srv.Close()
	p := loopbackOnly()
	p.MaxRedirects = 3
	_, err := p.Client(5 * time.Second).Get(srv.URL)
	var re *RedirectError
	if !errors.Is(err, ErrRedirectRefused) || !errors.As(err, &re) || re.Scheme != "file" {
		t.Fatalf("error %v, want a refused redirect", err)
	}
}
