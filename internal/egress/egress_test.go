package egress

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// loopbackOnly opens exactly 127.0.0.1, so the tests can reach their own servers while
// every other internal address stays refused.
func loopbackOnly() *Policy {
	return &Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
}

func TestCheck(t *testing.T) {
	p := &Policy{}
	tests := []struct {
		addr   string
		reason string // "" means allowed
	}{
		{"127.0.0.1", "loopback"},
		{"127.1.2.3", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"10.0.0.1", "private"},
		{"172.16.5.4", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"fd00::1", "unique-local"},
		{"224.0.0.1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"64:ff9b::7f00:1", "NAT64"},
		{"93.184.216.34", ""},
		{"2606:4700::1111", ""},
	}
	for _, tt := range tests {
		err := p.Check("", netip.MustParseAddr(tt.addr))
		var be *BlockedError
		switch {
		case tt.reason == "" && err != nil:
			t.Errorf("%s refused: %v", tt.addr, err)
		case tt.reason != "" && (!errors.As(err, &be) || be.Reason != tt.reason || !errors.Is(err, ErrBlocked)):
			t.Errorf("%s: error %v, want blocked as %s", tt.addr, err, tt.reason)
		}
	}
	if err := loopbackOnly().Check("", netip.MustParseAddr("::ffff:127.0.0.1")); err != nil {
		t.Errorf("an allowed address in mapped form was refused: %v", err)
	}
}

// Every request below is refused before a connection is attempted.
func TestClientRefusesInternalDestinations(t *testing.T) {
	p := &Policy{LookupIP: func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "rebind.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}}
	c := p.Client(5 * time.Second)
	for _, url := range []string{
		"http://127.0.0.1:9/",
		"http://[::1]:9/",
		"http://[::ffff:127.0.0.1]:9/",
		"http://0.0.0.0:9/",
		"http://10.0.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://rebind.test:9/",
	} {
		_, err := c.Get(url)
		if !errors.Is(err, ErrBlocked) {
			t.Errorf("GET %s: %v, want blocked", url, err)
		}
	}
}

func TestAllowedLoopbackIsReached(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	c := loopbackOnly().Client(5 * time.Second)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	// The allowlist is exact: another loopback address stays closed.
	if _, err := c.Get(strings.Replace(srv.URL, "127.0.0.1", "127.0.0.2", 1)); !errors.Is(err, ErrBlocked) {
		t.Fatalf("127.0.0.2: %v, want blocked", err)
	}
}

func TestRedirects(t *testing.T) {
	hops := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hops++
		switch r.URL.Path {
		case "/to-private":
			http.Redirect(w, r, "http://10.0.0.1/admin", http.StatusFound)
		case "/to-self":
			http.Redirect(w, r, "/final", http.StatusFound)
		default:
			io.WriteString(w, "final")
		}
	}))
	defer srv.Close()

	// Not followed by default: the 3xx is the answer.
	resp, err := loopbackOnly().Client(5 * time.Second).Get(srv.URL + "/to-private")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want the redirect itself", resp.StatusCode)
	}

	// Followed when enabled, each hop checked.
	p := loopbackOnly()
	p.MaxRedirects = 3
	if _, err := p.Client(5 * time.Second).Get(srv.URL + "/to-private"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("redirect to a private address: %v, want blocked", err)
	}
	resp, err = p.Client(5 * time.Second).Get(srv.URL + "/to-self")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("allowed redirect: status %d", resp.StatusCode)
	}
}
